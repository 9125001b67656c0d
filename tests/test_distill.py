"""The distillation tool on the tiny pair: fresh rounds of the target's own answers, training that lowers the
held-out KL, resumable checkpoints, and a shipped file that reloads into the same draft."""
from argparse import Namespace

import torch

from cascade_core.formats.shipped_draft import build_draft, load_draft
from distill import data
from distill.train import agreement, collate, held_out_set, round_prompts, train
from cascade_core.decoding.row import encode_prompt
from cascade_core.formats.loading import tiny_pair


def args_for(tmp_path, steps):
    return Namespace(layers=[1], lr=3e-3, batch_tokens=256, seed=0, minutes=10.0, steps=steps, eval_every=2,
                     out=str(tmp_path / "draft"), round_prompts=8, answer_tokens=16, gen_batch=8, tv_weight=1.0,
                     eval_samples=1, init_from=None)


def test_instructions_are_many_distinct_and_exclude_held_out_prompts():
    prompts = data.instructions()
    assert len(set(prompts)) == len(prompts) > 50_000
    assert not set(prompts) & set(data.EVAL_PROMPTS)
    assert round_prompts(prompts, 1, 8) == prompts[8:16]
    assert round_prompts(prompts, len(prompts) // 8, 8)[0] == prompts[0]  # wraps around


def test_every_kind_is_composed_in_equal_share_and_never_a_benchmark_or_held_out_prompt():
    from bench.harness import every_prompt
    from distill import kinds

    general = data.instructions()
    mixed = kinds.interleaved(general, never=data.EVAL_PROMPTS)
    measured = {p for ps in kinds.benchmark_prompts().values() for p in ps} | set(data.EVAL_PROMPTS) | every_prompt()
    assert not set(mixed) & measured and len(measured) > 40
    by_kind = kinds.by_kind(never=data.EVAL_PROMPTS)
    assert set(by_kind) == set(kinds.benchmark_prompts()) - {"explanation"}
    assert all(len(ps) >= 20 for ps in by_kind.values()) and sum(map(len, by_kind.values())) > 1500
    first = mixed[:7 * 100]  # a round: each kind's share is its seventh
    for kind, prompts in by_kind.items():
        assert sum(p in set(prompts) for p in first) == 100, kind
    assert len(mixed) <= len(general)


def test_learnt_positions_are_the_answer():
    pair = tiny_pair()
    examples = data.sampled_answers(pair, ["Hello", "Once upon a time"], 12, 2, 0, lambda m: None)
    ids, mask, learn = collate(examples, "cpu")
    for row, e in enumerate(examples):
        n = len(e["input_ids"])
        assert ids[row, :n].tolist() == e["input_ids"] and mask[row].sum() == n
        # position j is learnt iff its successor is an answer token
        assert learn[row].nonzero().flatten().tolist() == list(range(e["first"], n - 1))
        assert e["first"] == len(encode_prompt(pair.tokenizer, ["Hello", "Once upon a time"][row])) - 1


def test_distill_tiny(tmp_path):
    torch.manual_seed(0)
    pair = tiny_pair()
    for p in pair.target.parameters():
        p.requires_grad = False
    say = lambda m: None  # noqa: E731
    args = args_for(tmp_path, 30)
    held_out = held_out_set(pair, tmp_path, args, say)
    assert len(held_out) == len(data.EVAL_PROMPTS)

    before = agreement(pair, build_draft(pair.target, [1]), held_out)
    state = train(pair, tmp_path, args, say)
    assert state["step"] == 30 and state["round"] >= 2
    rows = (tmp_path / "curve.csv").read_text().splitlines()
    assert rows[0].startswith("round,step,tokens") and len(rows) >= 2
    assert float(rows[-1].split(",")[5]) < before["kl"]  # held-out KL fell

    state = train(pair, tmp_path, args_for(tmp_path, 40), say)  # resumes from the checkpoint
    assert state["step"] == 40

    draft, meta = load_draft(pair.target, tmp_path / "draft")
    assert meta["init_layers"] == [1] and meta["held_out"]["acceptance"] >= before["acceptance"]
    reloaded = agreement(pair, draft, held_out)
    assert abs(reloaded["acceptance"] - meta["held_out"]["acceptance"]) < 0.02  # float16 storage

    # a new run continuing the shipped draft starts where it ended
    again = args_for(tmp_path, 2)
    again.init_from, again.out = str(tmp_path / "draft"), str(tmp_path / "draft2")
    (tmp_path / "continued").mkdir()
    state = train(pair, tmp_path / "continued", again, say)
    assert state["continued_from"]["step"] == meta["step"]
    assert load_draft(pair.target, tmp_path / "draft2")[1]["continued_from"]["tokens"] == meta["tokens"]


def test_head_vocabulary_ranks_the_targets_own_mass_and_survives_retraining(tmp_path):
    """rank_head_vocabulary stores the tokens of most expected mass in the target's answers; the draft then loads
    with a head over them; a later training run's save keeps them; whole_vocabulary=True gives the tied head."""
    from cascade_core.formats.shipped_draft import SubVocabularyHead, head_vocabulary, save_draft
    from distill.vocab import rank_head_vocabulary

    pair = tiny_pair()
    save_draft(build_draft(pair.target, [1]), tmp_path / "draft", dict(init_layers=[1], step=0, tokens=0))
    summary = rank_head_vocabulary(pair, tmp_path / "draft", tmp_path / "work", 20, 8, 16, 8, 0, lambda m: None)
    ranked = head_vocabulary(tmp_path / "draft").tolist()
    assert len(ranked) == 20 and summary["coverage_of_p"]["20"] > 20 / pair.vocab_size
    # the ranking is by the target's expected counts over its own sampled answers
    from distill.vocab import ExpectedCounts

    counts = ExpectedCounts(pair.vocab_size)
    data.sampled_answers(pair, data.instructions(0)[:8], 16, 8, 0, lambda m: None, watch=counts)
    assert ranked == sorted(range(pair.vocab_size), key=lambda v: (-float(counts.mass[v]), v))[:20]

    draft, _ = load_draft(pair.target, tmp_path / "draft")
    assert isinstance(draft.lm_head, SubVocabularyHead) and draft.lm_head.token_ids.tolist() == ranked
    save_draft(draft, tmp_path / "draft", dict(init_layers=[1], step=1, tokens=1))  # as training saves
    assert head_vocabulary(tmp_path / "draft").tolist() == ranked
    whole, meta = load_draft(pair.target, tmp_path / "draft", whole_vocabulary=True)
    assert whole.lm_head is pair.target.lm_head and meta["step"] == 1 and meta["head_vocabulary"]["size"] == 20
