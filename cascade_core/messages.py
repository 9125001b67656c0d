"""How a message quotes a value, and which values count as numbers: the one place every check goes through, so a
huge or hostile value gets the same short sentence everywhere."""
import math

SHOWN_LENGTH = 60


def shown(value):
    """A value as a message quotes it: its repr, cut short (a 100,000-entry list or a 400-digit integer included)."""
    try:
        text = repr(value)
    except ValueError:  # an integer past Python's limit on digits for str()
        return "an integer too long to print"
    return text if len(text) <= SHOWN_LENGTH else text[: SHOWN_LENGTH - 3] + "..."


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_finite_number(value):
    """A number that is finite as a float: 10**400 is not (JSON allows such integers; float() overflows)."""
    try:
        return is_number(value) and math.isfinite(value)
    except OverflowError:
        return False
