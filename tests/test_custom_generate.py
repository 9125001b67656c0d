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
