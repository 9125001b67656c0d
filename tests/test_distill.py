"""The distillation tool on the tiny pair: data with the target's top-k, training that lowers the loss and
raises agreement, resumable checkpoints, and a shipped file that reloads into the same draft."""
from argparse import Namespace

import torch

from cascade_core import distill_data as data
from cascade_core.distill import agreement, build_student, load_draft, train
from cascade_core.models import tiny_pair


def args_for(tmp_path, steps):
    return Namespace(layers=[1], lr=3e-3, batch_tokens=512, seed=0, minutes=10.0, steps=steps, eval_every=10,
                     out=str(tmp_path / "draft"))


def test_distill_tiny(tmp_path):
    torch.manual_seed(0)
    pair = tiny_pair()
    for p in pair.target.parameters():
        p.requires_grad = False
    say = lambda m: None  # noqa: E731
    answers = data.sampled_answers(pair, ["Hello", "The cat", "Once upon", "Why"], 24, 2, 0, say)
    assert all(len(e["top_ids"]) == len(e["input_ids"]) - e["first"] - 1 for e in answers)
    text = data.read_texts(pair, ["the quick brown fox jumps over the lazy dog. " * 40], 48, 4, say)
    bundle = {"train": answers + text, "eval": answers[:2]}

    before = agreement(pair, build_student(pair.target, [1]), bundle["eval"], "cpu")
    state = train(pair, bundle, tmp_path, args_for(tmp_path, 30), say)
    assert state["step"] == 30
    rows = (tmp_path / "curve.csv").read_text().splitlines()
    assert rows[0].startswith("step,tokens") and len(rows) == 4
    assert float(rows[-1].split(",")[4]) < before["kl"]  # held-out KL fell

    state = train(pair, bundle, tmp_path, args_for(tmp_path, 40), say)  # resumes from the checkpoint
    assert state["step"] == 40

    draft, meta = load_draft(pair.target, tmp_path / "draft")
    assert meta["init_layers"] == [1] and meta["held_out"]["acceptance"] >= before["acceptance"]
    reloaded = agreement(pair, draft, bundle["eval"], "cpu")
    assert abs(reloaded["acceptance"] - meta["held_out"]["acceptance"]) < 0.02  # float16 storage
