"""The engines' keep-set rules (cascade_core/method/keep_sets.py) against their code read literally
(cascade_core/reference.py's literal_keep): the emitted distribution by enumeration on random distributions, the
rejection probability, batched rows == solo runs, and the claims their docstrings and the lesson make. The engine ==
reference loop at every gamma and the chi-square tests run for them with every rule (test_exactness.py,
test_distribution.py)."""
import numpy as np
import pytest
import torch

from cascade_core import generate, generate_batch
from cascade_core.method.costs import rejection_terms
from cascade_core.method.distributions import Distributions
from cascade_core.method.rules import RULES, acceptance_probability
from cascade_core.method.sampling import output_distribution
from cascade_core.reference import literal_keep
from test_batch import ids, same_run, solo

KEEP_SETS = [name for name, rule in RULES.items() if rule.keep is not None]


def random_pair(seed, vocabulary=12, holes=False):
    g = torch.Generator().manual_seed(seed)
    q, p = (torch.softmax(torch.randn(vocabulary, generator=g, dtype=torch.float64) * s, -1) for s in (1.5, 2.5))
    if holes:  # a head's sub-vocabulary: q zero outside a third of the tokens
        q = q * (torch.arange(vocabulary) % 3 == 0)
        q = q / q.sum()
    return q, p


def literal_output(rule, q, p, alpha):
    """Enumerate the draft's proposals: x with q(x), kept with a(x), else the normalised replacement."""
    q, p, out = q.numpy(), p.numpy(), np.zeros(len(q))
    for x in range(len(q)):
        keep, replacement = literal_keep(rule, x, p, p, alpha)
        out[x] += q[x] * keep
        out += q[x] * (1 - keep) * replacement / replacement.sum()
    return torch.tensor(out)


@pytest.mark.parametrize("rule", KEEP_SETS)
@pytest.mark.parametrize("alpha", [0.0, 0.2, 0.55, 0.9, 1.0])
@pytest.mark.parametrize("holes", [False, True])
def test_emitted_distribution_is_the_enumerated_one(rule, alpha, holes):
    for seed in range(20):
        q, p = random_pair(seed, holes=holes)
        d = Distributions(q[None], p[None])
        out = output_distribution(rule, d, alpha)[0]
        assert torch.allclose(out, literal_output(rule, q, p, alpha), atol=1e-12)
        keep = torch.tensor([literal_keep(rule, x, p.numpy(), p.numpy(), alpha)[0] for x in range(len(q))])
        assert rejection_terms(rule, q, p, alpha).total == pytest.approx(1 - float((q * keep).sum()), abs=1e-12)


def test_sglang_is_lossy_with_the_drafts_q_read_as_one():
    """SGLang's kernel is handed zeros for the draft's probabilities: its keep test is lossy's min(1, p(x) / ((1 -
    alpha) q(x))) with q(x) = 1 (alpha = 1 - its threshold). At its default (alpha 0) it keeps x with p(x) and
    replaces it from p without x, which emits p exactly for any draft (q(y) p(y) + p(y) (1 - q(y))), yet rejects
    with 1 - sum_x q(x) p(x) >= TV(p, q), lossless's (min(q, p) >= q p): exact, at more rejections."""
    for seed in range(10):
        q, p = random_pair(seed)
        d = Distributions(q[None], p[None])
        for alpha in (0.0, 0.3, 0.8):
            assert torch.allclose(RULES["sglang"].keep(d, alpha)[0],
                                  acceptance_probability(torch.ones_like(p), p, alpha))
        assert torch.allclose(output_distribution("sglang", d, 0.0)[0], p, atol=1e-12)
        assert (output_distribution("sglang", d, 0.5)[0] - p).abs().sum() > 1e-5  # lossy below t = 1
        lossless = rejection_terms("lossless", q, p, 0.0).total
        assert rejection_terms("sglang", q, p, 0.0).total == pytest.approx(1 - float((q * p).sum()))
        assert rejection_terms("sglang", q, p, 0.0).total > lossless


def test_relaxed_at_delta_zero_and_typical_at_its_edges_are_greedy():
    """Relaxed acceptance with delta 0 keeps the target's argmax alone, and a rejection emits it: the output is the
    target's greedy token whatever the draft (TensorRT-LLM's default). Typical acceptance at alpha 0 (epsilon 1)
    keeps only the tokens above 0.3 exp(-H(p)), and always keeps the argmax (exp(-H) <= max p)."""
    for seed in range(10):
        q, p = random_pair(seed)
        d = Distributions(q[None], p[None])
        greedy = torch.nn.functional.one_hot(p.argmax(), len(p)).double()
        assert torch.allclose(output_distribution("relaxed", d, 0.0)[0], greedy, atol=1e-12)
        assert RULES["typical"].keep(d, 0.0)[0, p.argmax()] == 1


@pytest.mark.parametrize("gamma", [1, 3])
def test_keep_set_rows_are_their_solo_runs(tiny64, gamma):
    rows = [dict(prompt_ids=ids(tiny64, text), rule=rule, alpha=alpha, seed=seed, temperature=t, max_new_tokens=24)
            for (text, rule, alpha, seed, t) in (("The cascade", "sglang", 0.5, 1, 1.0), ("x", "relaxed", 0.02, 2, 0.7),
                                                 ("Greedy", "typical", 0.9, 3, 1.0), ("A", "sglang", 0.0, 4, 0.0),
                                                 ("The cascade", "v3", 0.6, 7, 1.0))]
    batched = generate_batch(tiny64, rows, gamma=gamma)
    for row, trace in zip(rows, batched):
        same_run(trace, solo(tiny64, row, gamma))
    sources = {s for t in batched[:3] for s in t.sources}
    assert {"accepted", "replaced"} <= sources  # the keep sets both keep and reject on this pair


def test_trace_and_json_name_the_keep_set_rule(tiny64):
    trace = generate(tiny64, prompt_ids=ids(tiny64, "The cascade"), rule="relaxed", alpha=0.02, gamma=3, seed=1,
                     max_new_tokens=16)
    positions = trace.to_dict()["positions"]
    assert all(0.0 <= pos["tv_to_target"] <= 1.0 for pos in positions if pos.get("tv_to_target") is not None)
    assert trace.to_dict()["speculative_decoding"]["num_draft_tokens"] > 0


def test_the_engines_lesson_claims():
    """The lesson "The rules your engine ships": relaxed keeps v2's accepted set within the target's top 10 (Eq. 14
    with alpha = delta); SGLang at alpha 0 keeps x with p(x) <= min(1, p(x) / q(x)), lossless's keep probability, so
    it never rejects less; its answer (SGLang rejects more at the Sandbox's eight tokens) is that rule's."""
    from app.engine_lesson import held_engines, look_for_engines
    from app.lessons import LESSONS

    for seed in range(20):
        q, p = random_pair(seed, vocabulary=30)
        d = Distributions(q[None], p[None])
        for delta in (0.0, 0.05, 0.2, 0.6):
            top = torch.zeros(30, dtype=torch.bool)
            top[p.topk(10).indices] = True
            v2_kept = ~RULES["v2"].defers(d, delta)[0]
            assert torch.equal(RULES["relaxed"].keep(d, delta)[0] == 1, v2_kept & top)
        assert (RULES["sglang"].keep(d, 0.0)[0] <= acceptance_probability(q, p) + 1e-15).all()
    lesson = next(lesson for lesson in LESSONS if lesson.look is look_for_engines)
    assert lesson.answers[held_engines(lesson.rows)].text == "SGLang."
    assert "It held" in lesson.reveal("SGLang.", lesson.rows) and "Lemma 3" in lesson.reveal("Lossless.", lesson.rows)
    assert "| relaxed alpha 0.3 | A, Once |" in look_for_engines(lesson.rows)


def test_the_teaching_kits_numbers_are_the_rules():
    """docs/teaching.md's lesson-9 numbers, computed at the Sandbox's eight tokens."""
    from pathlib import Path

    from app.sandbox import START

    _, q, p = START
    total = {rule: round(rejection_terms(rule, q, p, alpha).total, 4) for rule, alpha in
             (("sglang", 0.0), ("lossless", 0.0), ("relaxed", 0.3), ("v2", 0.3))}
    assert total == {"sglang": 0.8177, "lossless": 0.43, "relaxed": 0.67, "v2": 0.4861}
    kit = (Path(__file__).parent.parent / "docs" / "teaching.md").read_text()
    assert all(f"{value:g}" in kit for value in total.values())
