"""On a CUDA device (skipped elsewhere): the engine on the GPU gives the CPU reference's tokens, and greedy
lossless on the bundled pair in float32 gives the target's own greedy text."""
import pytest
import torch

from cascade_core import RULES, generate, load_pair
from cascade_core.decoding.row import encode_prompt
from cascade_core.formats.loading import tiny_pair
from cascade_core.reference import reference_generate
from test_exactness import ALPHA, N

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@pytest.fixture(scope="module")
def tiny64_cuda():
    return tiny_pair(dtype=torch.float64, device="cuda")


@pytest.mark.parametrize("rule", RULES)
def test_engine_on_cuda_equals_cpu_reference(tiny64, tiny64_cuda, rule):
    prompt_ids = tiny64.tokenizer("The cascade", add_special_tokens=False)["input_ids"]
    expected = reference_generate(tiny64, prompt_ids, rule, ALPHA[rule], 1.0, seed=7, max_new_tokens=N)
    for gamma in (1, 4):
        trace = generate(tiny64_cuda, prompt_ids=prompt_ids, rule=rule, alpha=ALPHA[rule], gamma=gamma,
                         temperature=1.0, seed=7, max_new_tokens=N)
        assert trace.tokens == expected, f"{rule} gamma={gamma}"


@pytest.mark.parametrize("prompt", ["Who is Buzz Aldrin?", "Write a haiku about the sea."])
def test_bundled_greedy_lossless_on_cuda_equals_target_greedy(prompt):
    pair = load_pair("bundled", dtype=torch.float32, device="cuda", progress=lambda m: None)
    ids = encode_prompt(pair.tokenizer, prompt)
    with torch.no_grad():
        out = pair.target.generate(torch.tensor([ids], device="cuda"), do_sample=False, max_new_tokens=40,
                                   attention_mask=torch.ones(1, len(ids), dtype=torch.long, device="cuda"))
    for gamma in (1, 4):
        trace = generate(pair, prompt, rule="lossless", alpha=0.0, gamma=gamma, temperature=0, max_new_tokens=40)
        assert trace.tokens == out[0, len(ids):].tolist()


def test_bundled_cascade_runs_in_bfloat16_on_cuda():
    pair = load_pair("bundled", device="cuda", progress=lambda m: None)
    assert pair.target.dtype == torch.bfloat16
    trace = generate(pair, "Tell me about the moon.", rule="chow", alpha=0.5, gamma=4, seed=1, max_new_tokens=48)
    assert set(trace.sources) == {"accepted", "deferred", "replaced"} and trace.text.strip()
