"""What a prompt's text says before any tokenizer reads it: whether it shows anything at all, and whether it can
fit a pair's context, from its length alone. Both take microseconds on any prompt, where tokenizing a 5 MB one took
14.7 s (on the engine thread every call shares) before the context check refused it, so a caller's size mistake
costs nobody else anything.

The length check is safe: it refuses only a prompt that cannot fit whatever its tokens. A byte-pair tokenizer
covers every character of its (normalised) text with tokens, and no token spans more characters than its longest
vocabulary string (a byte-level vocabulary writes one character per byte, and a character is at least one byte),
so a prompt of n characters is at least n / longest tokens. A normaliser that composes Unicode (NFC, NFKC) can join
up to four code points into one, so a prompt not already in that form counts a quarter of its characters; a
tokenizer whose text can shrink further before it is read (fused unknowns, stripping, deleting replacements), or
that is not byte-pair, gets no bound, and its prompt is checked once tokenized, as before.
"""
import json
import re
import unicodedata
import weakref
from math import ceil

# What shows nothing: whitespace and control characters, every format character of Unicode 15 (zero-width space and
# joiners, bidirectional marks, the byte-order mark, tags, ...) and the characters drawn blank (the combining
# grapheme joiner, Hangul fillers, the braille blank, variation selectors). tests/test_fair_share.py checks the
# format and control characters against this Python's unicodedata.
INVISIBLE = ("\\s\x00-\x1f\x7f-\x9f\xad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160\u17b4"
             "\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\u2800\u3164\ufe00-\ufe0f\ufeff"
             "\uffa0\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
             "\U000e0001\U000e0020-\U000e007f\U000e0100-\U000e01ef")
VISIBLE = re.compile(f"[^{INVISIBLE}]")
COMPOSING = {"NFC": 4, "NFKC": 4}  # Unicode forms that compose: how many code points they may join into one
LENGTH_KEEPING = {"Lowercase", "Prepend", "NFD", "NFKD"}  # normalisers that never shorten a text
_LONGEST = weakref.WeakKeyDictionary()  # tokenizer -> (its longest token's characters, its normalisers)


def blank(prompt):
    """Whether a prompt shows nothing: only spaces and invisible characters (it stops at the first visible one)."""
    return VISIBLE.search(prompt) is None


def normalisers(tokenizer):
    """The normalisers a fast tokenizer runs before its model, as {"type": ...} records (its Sequence unrolled), or
    None where one may shorten the text beyond what ``shortening`` allows for."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    normaliser = getattr(backend, "normalizer", None)
    records = [] if normaliser is None else [json.loads(normaliser.__getstate__())]
    while any(record["type"] == "Sequence" for record in records):
        records = [inner for record in records
                   for inner in (record["normalizers"] if record["type"] == "Sequence" else [record])]
    if all(record["type"] in COMPOSING or record["type"] in LENGTH_KEEPING or keeps_length(record)
           for record in records):
        return records
    return None


def keeps_length(record):
    """Whether a Replace normaliser writes at least as many characters as it replaces (Llama's ' ' -> '▁')."""
    pattern = record.get("pattern", {}).get("String") if record["type"] == "Replace" else None
    return pattern is not None and len(record["content"]) >= len(pattern)


def longest_token(tokenizer):
    """(the most characters one token of ``tokenizer`` stands for, its normalisers), or None where no such bound
    holds (see the module docstring); computed once per tokenizer."""
    try:
        return _LONGEST[tokenizer]
    except KeyError:
        pass
    model = getattr(getattr(tokenizer, "backend_tokenizer", None), "model", None)
    records = normalisers(tokenizer)
    bound = None
    if type(model).__name__ == "BPE" and not model.fuse_unk and records is not None:
        bound = max(map(len, tokenizer.get_vocab())), records
    _LONGEST[tokenizer] = bound
    return bound


def fewest_tokens(prompt, tokenizer):
    """The fewest tokens ``tokenizer`` can read ``prompt`` as (a lower bound, from its length alone), or None."""
    bound = longest_token(tokenizer)
    if bound is None:
        return None
    longest, records = bound
    joined = max([COMPOSING[r["type"]] for r in records if r["type"] in COMPOSING
                  and not unicodedata.is_normalized(r["type"], prompt)], default=1)
    return ceil(len(prompt) / (longest * joined))


def check_length(prompt, pair, max_new_tokens):
    """Refuse, in one sentence, a prompt that cannot fit the pair's context beside ``max_new_tokens`` whatever its
    tokens (its tokenizer reads it as ``fewest_tokens`` at least); what may fit is checked once tokenized
    (RunSettings.check_for)."""
    fewest = fewest_tokens(prompt, pair.tokenizer) if pair.tokenizer is not None else None
    room = max(0, pair.max_positions - max_new_tokens)
    if fewest is not None and fewest > room:
        raise ValueError(f"the prompt ({len(prompt):,} characters, so at least {fewest:,} tokens: no token of this "
                         f"pair's tokenizer spans more than {longest_token(pair.tokenizer)[0]} characters) plus "
                         f"max_new_tokens ({max_new_tokens}) exceeds the models' context of {pair.max_positions} "
                         "tokens; shorten the prompt or ask for fewer tokens")
