"""Results computed in two places (another process, a Ray worker, another thread count, a resumed run) are the same
when everything discrete is equal (tokens, texts, sources, counts, rules, ids) and every float measure agrees within
FLOAT_TOLERANCE. A float's last digits depend on the order a BLAS sums in, and that order changes with the CPU's
kernels (AVX2 against AVX-512/AMX) and the thread count: a target NLL of 2.17375 on one was 2.1737498 on the other."""
import math

# Relative, with an absolute floor for measures near zero: float32 products of the tiny and bundled pairs differ by
# ~1e-7 relative across thread counts; a changed token moves a row's NLL or rates by far more than this.
FLOAT_TOLERANCE = dict(rel_tol=1e-5, abs_tol=1e-7)


def differences(a, b, where="result"):
    """Where two results (dicts, lists and scalars, nested) differ: discrete values exactly, floats within
    FLOAT_TOLERANCE. One line per difference, naming its place."""
    if isinstance(a, bool) or isinstance(b, bool) or not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
        if isinstance(a, dict) and isinstance(b, dict):
            if set(a) != set(b):
                return [f"{where}: keys {sorted(set(a) ^ set(b))} in one only"]
            return [line for key in a for line in differences(a[key], b[key], f"{where}[{key!r}]")]
        if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
            if len(a) != len(b):
                return [f"{where}: {len(a)} items against {len(b)}"]
            return [line for i, (x, y) in enumerate(zip(a, b)) for line in differences(x, y, f"{where}[{i}]")]
        return [] if a == b and type(a) is type(b) else [f"{where}: {a!r} != {b!r}"]
    if isinstance(a, int) and isinstance(b, int):  # counts: exact
        return [] if a == b else [f"{where}: {a!r} != {b!r}"]
    close = math.isclose(a, b, **FLOAT_TOLERANCE) or (math.isnan(a) and math.isnan(b))
    return [] if close else [f"{where}: {a!r} and {b!r} differ beyond {FLOAT_TOLERANCE}"]


def assert_same(a, b, where="result"):
    found = differences(a, b, where)
    assert not found, "\n".join(found[:10])
