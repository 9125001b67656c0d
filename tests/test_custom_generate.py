"""transformers' generate(custom_generate=<this repo>) runs the cascade for every deferral name."""
from pathlib import Path

import pytest
import torch

from cascade_core import generate
from cascade_core.models import tiny_pair

REPO = str(Path(__file__).resolve().parents[1])


@pytest.fixture(scope="module")
def pair():
    return tiny_pair()


@pytest.mark.parametrize("deferral", ["opt", "v1", "v2", "v3", "chow", "diff"])
@pytest.mark.parametrize("do_sample", [True, False])
def test_custom_generate_matches_engine(pair, deferral, do_sample):
    inputs = pair.tokenizer("Who is Buzz Aldrin?", return_tensors="pt")
    alpha = 0.25
    torch.manual_seed(5)
    out = pair.target.generate(**inputs, assistant_model=pair.draft, do_sample=do_sample, alpha=alpha,
                               deferral=deferral, custom_generate=REPO, trust_remote_code=True, max_new_tokens=32)
    prompt = inputs["input_ids"][0].tolist()
    assert out.shape[0] == 1 and out[0, : len(prompt)].tolist() == prompt
    torch.manual_seed(5)
    seed = int(torch.randint(0, 2**31 - 1, ()))  # the entry point's default seed source
    trace = generate(pair, prompt_ids=prompt, rule=deferral, alpha=alpha, gamma=4,
                     temperature=1.0 if do_sample else 0.0, seed=seed, max_new_tokens=32)
    assert out[0, len(prompt):].tolist()[: len(trace.tokens)] == trace.tokens


def test_custom_generate_greedy_lossless_is_target_greedy(pair):
    inputs = pair.tokenizer("The cascade", return_tensors="pt")
    plain = pair.target.generate(**inputs, do_sample=False, max_new_tokens=24)
    ours = pair.target.generate(**inputs, assistant_model=pair.draft, do_sample=False, deferral="lossless",
                                custom_generate=REPO, trust_remote_code=True, max_new_tokens=24)
    assert ours.tolist() == plain.tolist()


def test_a_left_padded_batch_runs_as_one_batch_and_each_row_is_its_solo_run(pair, monkeypatch):
    """Rows of different lengths, left-padded as tokenizers give them: one engine batch, each row its solo run."""
    prompts = [pair.tokenizer(text, add_special_tokens=False)["input_ids"]
               for text in ("Who is Buzz Aldrin?", "The cascade", "A somewhat longer prompt than the others")]
    width = max(map(len, prompts))
    input_ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
    attention_mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    from cascade_core.engine import Batch

    batches = []
    start = Batch.__init__
    monkeypatch.setattr(Batch, "__init__", lambda self, pair, rows, gamma: batches.append(len(rows)) or
                        start(self, pair, rows, gamma))
    out = pair.target.generate(input_ids=input_ids, attention_mask=attention_mask, assistant_model=pair.draft,
                               do_sample=True, alpha=0.3, deferral="v3", seed=11, custom_generate=REPO,
                               trust_remote_code=True, max_new_tokens=20)
    assert batches == [3]
    for b, prompt in enumerate(prompts):
        trace = generate(pair, prompt_ids=prompt, rule="v3", alpha=0.3, gamma=4, temperature=1.0, seed=11,
                         max_new_tokens=20)
        assert out[b, : len(prompt)].tolist() == prompt
        assert out[b, len(prompt): len(prompt) + len(trace.tokens)].tolist() == trace.tokens
