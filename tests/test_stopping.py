"""How a run stops: min_new_tokens (end-of-text impossible before it, exact against the naive loop), a stop
predicate, the caller's end-of-text ids, and their checks."""
import pytest
import torch

from cascade_core import RULES, generate, generate_batch
from cascade_core.formats.loading import tiny_pair
from cascade_core.reference import reference_generate

from rule_alphas import ALPHA
PROMPT = [1, 2, 3]
MIN, MAX = 12, 24


@pytest.fixture(scope="module")
def small():
    """A 12-token vocabulary: end-of-text is common, so min_new_tokens changes most runs."""
    return tiny_pair(dtype=torch.float64, vocab_size=12)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("rule", RULES)
def test_min_new_tokens_equals_the_reference_loop(small, rule, temperature):
    expected = reference_generate(small, PROMPT, rule, ALPHA[rule], temperature, seed=3, max_new_tokens=MAX,
                                  min_new_tokens=MIN)
    assert not set(expected[:MIN]) & small.eos_token_ids
    for gamma in (1, 4):
        trace = generate(small, prompt_ids=PROMPT, rule=rule, alpha=ALPHA[rule], gamma=gamma,
                         temperature=temperature, seed=3, max_new_tokens=MAX, min_new_tokens=MIN)
        assert trace.tokens == expected, f"{rule} T={temperature} gamma={gamma}"


def test_min_new_tokens_changes_runs_that_would_stop_early(small):
    """Guard against a vacuous comparison: without it, many of these 22 runs end before MIN tokens (10 here)."""
    short = [rule for rule in RULES for t in (0.0, 1.0)
             if len(generate(small, prompt_ids=PROMPT, rule=rule, alpha=ALPHA[rule], temperature=t, seed=3,
                             max_new_tokens=MAX).tokens) < MIN]
    assert len(short) >= 8


def test_lossless_greedy_with_min_new_tokens_is_transformers_greedy(small):
    trace = generate(small, prompt_ids=PROMPT, rule="lossless", temperature=0, max_new_tokens=MAX,
                     min_new_tokens=MIN)
    plain = small.target.generate(torch.tensor([PROMPT]), do_sample=False, min_new_tokens=MIN, max_new_tokens=MAX,
                                  eos_token_id=sorted(small.eos_token_ids), pad_token_id=0)
    assert trace.tokens == plain[0, len(PROMPT):].tolist()[: len(trace.tokens)]
    assert len(trace.tokens) >= MIN


def test_a_stop_predicate_ends_the_run_at_the_first_token_it_holds(small):
    rows = [dict(prompt_ids=PROMPT, rule=rule, alpha=ALPHA[rule], seed=seed, max_new_tokens=MAX, min_new_tokens=MIN)
            for seed, rule in enumerate(["v3", "chow", "lossless", "target"])]
    free = generate_batch(small, rows, gamma=4)
    stopped = generate_batch(small, [dict(row, stop=lambda ids: ids[-1] == 2) for row in rows], gamma=4)
    for whole, cut in zip(free, stopped):
        first = next((k for k, token in enumerate(whole.tokens) if token == 2), None)
        if first is None:
            assert cut.tokens == whole.tokens and cut.stop_reason == whole.stop_reason
        else:
            assert cut.tokens == whole.tokens[: first + 1] and cut.stop_reason == "stop"
    assert any(t.stop_reason == "stop" for t in stopped)


def test_the_callers_end_of_text_ids_replace_the_pairs(small):
    trace = generate(small, prompt_ids=PROMPT, rule="target", seed=2, max_new_tokens=MAX, eos_token_ids=[4])
    whole = generate(small, prompt_ids=PROMPT, rule="target", seed=2, max_new_tokens=MAX, stop_at_eos=False)
    first = whole.tokens.index(4)
    assert trace.tokens == whole.tokens[: first + 1] and trace.stop_reason == "eos"
    assert 11 in trace.tokens  # the pair's own end-of-text no longer stops it


@pytest.mark.parametrize("field, value, message", [
    ("min_new_tokens", -1, "min_new_tokens must be a whole number from 0 to 24, got -1"),
    ("min_new_tokens", 25, "min_new_tokens must be a whole number from 0 to 24, got 25"),
    ("eos_token_ids", "x", "eos_token_ids must be a token id or a list of them (whole numbers >= 0), got 'x'"),
    ("eos_token_ids", [1.5], "eos_token_ids must be a token id or a list of them (whole numbers >= 0), got [1.5]"),
    ("stop", 3, "stop must be a function of the generated token ids, got 3"),
])
def test_bad_stopping_settings_are_named(small, field, value, message):
    with pytest.raises(ValueError) as error:
        generate(small, prompt_ids=PROMPT, max_new_tokens=MAX, **{field: value})
    assert str(error.value) == message


def test_min_new_tokens_holds_back_end_of_text_in_a_sub_vocabulary(small):
    """A draft whose logits cover some columns only (a head's vocabulary): end-of-text loses the same column it
    would lose over the whole vocabulary, and only before min_new_tokens."""
    from cascade_core.decoding.row import start_row
    from cascade_core.decoding.run_settings import RunSettings

    row = start_row(small, RunSettings(max_new_tokens=MAX, min_new_tokens=2), prompt_ids=PROMPT)
    (eos,) = small.eos_token_ids
    columns = torch.tensor([0, 3, eos, 7])
    full = torch.randn(3, 12)
    compact = row.allowed(full[:, columns], 0, columns)
    assert torch.equal(compact, row.allowed(full, 0)[:, columns])
    assert compact[:2, 2].isneginf().all() and compact[2, 2] == full[2, eos] and compact[:, [0, 1, 3]].isfinite().all()
