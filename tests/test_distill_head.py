"""distill --head on a tiny four-layer target: answers and features made once per round and kept, the draft
vocabulary ranked by the target's expected counts, training that raises held-out acceptance and resumes, the head
saved in the published format; the loss, the batched features and the held-out measure against their definitions."""
from argparse import Namespace

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from cascade_core.formats.eagle3_head import load_head, new_head
from cascade_core.formats.loading import tiny_pair
from cascade_core.formats.pair import make_pair
from cascade_core.formats.shipped_draft import scattered
from distill import data
from distill.head import (collate, evaluate, expected_accepted, features_of, soft_cross_entropy, started_head,
                          train_head, unrolled)

LAYERS = (2, 2, 1)  # the defaults (2, L // 2, L - 3) for four layers


def four_layer_pair():
    tiny = tiny_pair()
    target = LlamaForCausalLM(LlamaConfig(**{**tiny.target.config.to_dict(), "num_hidden_layers": 4})).eval()
    for p in target.parameters():
        p.requires_grad = False
    return make_pair("tiny4", target, target, tiny.tokenizer)


def args_for(tmp_path, steps):
    return Namespace(rounds=2, round_prompts=6, answer_tokens=12, gen_batch=6, seed=0, draft_vocabulary=40,
                     eval_samples=1, batch_tokens=256, lr=3e-3, unroll=2, minutes=10.0, steps=steps, eval_every=5,
                     compile=False, first_step_minutes=0.0, out=str(tmp_path / "head"), work=str(tmp_path / "work"),
                     init_from=None)


def test_head_distillation_tiny(tmp_path):
    torch.manual_seed(0)
    pair, say = four_layer_pair(), lambda m: None
    state = train_head(pair, args_for(tmp_path, 10), say)
    work = tmp_path / "work"
    assert state["step"] == 10 and [c[0] for c in state["curve"]] == [5, 10]
    kept = {p: p.stat().st_mtime_ns for p in [*work.glob("answers/*.pt"), *work.glob("features/*.pt")]}
    assert len(kept) == 4

    # the draft vocabulary: the 40 tokens of most expected mass over both rounds' answers
    mass = sum(torch.load(work / "answers" / f"{r:04d}.pt")["mass"] for r in range(2))
    ranked = sorted(range(pair.vocab_size), key=lambda v: (-float(mass[v]), v))[:40]
    head = load_head(tmp_path / "head", pair.target)
    assert head.aux_layers == LAYERS and head.token_ids.tolist() == sorted(ranked)
    assert head.meta["step"] in (5, 10) and len(head.meta["held_out_acceptance_by_step"]["0.7"]) == 2

    # held-out acceptance rose from the untrained head (same vocabulary, same start)
    held = torch.load(work / "held_out_features.pt")
    untrained = evaluate(new_head(pair.target, sorted(ranked), LAYERS).float(), held,
                         pair.target.get_output_embeddings().weight.float(), 2)
    assert state["curve"][-1][3]["1.0"][0] > untrained["1.0"][0]

    # resumed: the kept answers and features are read, not made again
    state = train_head(pair, args_for(tmp_path, 15), say)
    assert state["step"] == 15 and [c[0] for c in state["curve"]] == [5, 10, 15]
    assert kept == {p: p.stat().st_mtime_ns for p in kept}

    # trained on from the saved head, on new data: its weights carried over, its held-out score the one to beat
    said, shipped = [], load_head(tmp_path / "head", pair.target)
    more = Namespace(**{**vars(args_for(tmp_path, 10)), "init_from": str(tmp_path / "head"), "seed": 1,
                        "out": str(tmp_path / "head2"), "work": str(tmp_path / "work2")})
    state = train_head(pair, more, said.append)
    start = evaluate(shipped.float(), torch.load(tmp_path / "work2" / "held_out_features.pt"),
                     pair.target.get_output_embeddings().weight.float(), 2)
    assert any(m.endswith(f"at T 0.7 {start['0.7']}") for m in said)
    assert (tmp_path / "head2").exists() == (state["best"] > expected_accepted(start["0.7"]))
    if (tmp_path / "head2").exists():
        assert load_head(tmp_path / "head2", pair.target).meta["continued_from"]["step"] == shipped.meta["step"]

    # what is carried over onto a vocabulary ranked anew: all but the LM head, and its rows of the shared tokens
    ranked = list(range(20, 60))  # 20 of the shipped head's 40 tokens at most
    head, start = started_head(pair, ranked, LAYERS, str(tmp_path / "head"), said.append)
    assert start.meta == shipped.meta and head.token_ids.tolist() == ranked
    assert torch.equal(head.fc.weight, shipped.fc.weight.float())
    assert torch.equal(head.midlayer.mlp.down_proj.weight, shipped.midlayer.mlp.down_proj.weight.float())
    target_rows = pair.target.get_output_embeddings().weight.float()
    for k, t in enumerate(ranked):
        row = (shipped.token_ids == t).nonzero()
        want = shipped.lm_head.weight[row[0, 0]].float() if len(row) else target_rows[t]
        assert torch.equal(head.lm_head.weight[k], want), t
    assert 0 < sum(int(t) in set(ranked) for t in shipped.token_ids) < 40


def test_batched_features_are_each_examples_own():
    """Right-padded rows in one forward give each example the streams and final state of its own forward."""
    pair = four_layer_pair()
    examples = data.sampled_answers(pair, ["Hi", "Tell me a story about the sea", "Why?"], 10, 3, 0, lambda m: None)
    for example, item in zip(examples, features_of(pair, examples, LAYERS)):
        with torch.no_grad():
            out = pair.target.model(input_ids=torch.tensor([example["input_ids"]]), output_hidden_states=True)
        streams = torch.cat([out.hidden_states[i] for i in LAYERS], -1)[0]
        assert item["ids"].tolist() == example["input_ids"] and item["first"] == example["first"]
        assert torch.allclose(item["streams"].float(), streams, rtol=2e-3, atol=2e-3)  # float16 storage
        assert torch.allclose(item["final"].float(), out.last_hidden_state[0], rtol=2e-3, atol=2e-3)


def test_soft_cross_entropy_is_its_definition():
    torch.manual_seed(0)
    z, p = torch.randn(7, 11, dtype=torch.float64) * 3, torch.softmax(torch.randn(7, 11, dtype=torch.float64), -1)
    expected = -(p * torch.log_softmax(z, -1)).sum(-1).mean()
    assert torch.allclose(soft_cross_entropy(z, p).double(), expected, rtol=1e-6, atol=0)  # computed in float32


def test_held_out_measure_is_one_minus_tv_over_the_whole_vocabulary():
    """evaluate's 1 - TV at each temperature, against TV computed over the whole vocabulary with q scattered there
    (zero outside the head's tokens) at the positions each drafting step predicts."""
    torch.manual_seed(0)
    pair = four_layer_pair()
    examples = data.sampled_answers(pair, ["Hi there", "Name a colour"], 8, 2, 0, lambda m: None)
    held = features_of(pair, examples, LAYERS)
    head = new_head(pair.target, list(range(0, pair.vocab_size, 2)), LAYERS).float()
    full = pair.target.get_output_embeddings().weight.float()
    got = evaluate(head, held, full, 2, temperatures=(1.0, 0.5))
    ids, streams, final, lengths, firsts = collate(held)
    with torch.no_grad():
        outs = unrolled(head, ids, streams, 2)
    for t in (1.0, 0.5):
        for j, h in enumerate(outs, start=1):
            tvs = []
            for r in range(len(held)):
                for base in range(int(firsts[r]) - j, int(lengths[r]) - j - 1):  # base + j is an answer position
                    if base < 0:
                        continue
                    with torch.no_grad():
                        q = torch.softmax(scattered(head.draft_logits(h[r, base]), head.token_ids, pair.vocab_size)
                                          / t, -1)
                        p = torch.softmax(final[r, base + j] @ full.T / t, -1)
                    tvs.append(0.5 * float((p - q).abs().sum()))
            assert abs(got[str(t)][j - 1] - (1 - sum(tvs) / len(tvs))) < 1e-4


def test_acceptance_ceiling_is_the_targets_mass_inside_the_vocabulary():
    from distill.head import acceptance_ceiling

    pair = four_layer_pair()
    examples = data.sampled_answers(pair, ["Hi there", "Name a colour"], 8, 2, 0, lambda m: None)
    held = features_of(pair, examples, LAYERS)
    full, vocab = pair.target.get_output_embeddings().weight.float(), pair.vocab_size
    ranked = list(range(vocab - 1, -1, -1))
    got = acceptance_ceiling(held, ranked, full, [vocab // 3, vocab], 0.7)
    assert abs(got[vocab] - 1.0) < 1e-4
    masses = [float(p[ranked[: vocab // 3]].sum()) for x in held
              for p in torch.softmax(x["final"][x["first"] + 1:].float() @ full.T / 0.7, -1)]
    assert abs(got[vocab // 3] - sum(masses) / len(masses)) < 1e-4
