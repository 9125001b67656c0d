"""Bad input raises a clear ValueError: NaN logits, mismatched tokenizers, resume beyond the trace."""
import pytest
import torch

from cascade_core import generate
from cascade_core.formats.loading import ascii_tokenizer, check_same_tokenizer, tiny_pair


@pytest.mark.parametrize("model", ["target", "draft"])
@pytest.mark.parametrize("temperature", [0.0, 0.7, 1.0])
def test_nan_logits_are_refused(model, temperature):
    """Either model's broken logits are named as such at every temperature (the draft's are checked by the one
    reduction its distributions' check makes), not blamed on the temperature."""
    pair = tiny_pair()
    with torch.no_grad():
        getattr(pair, model).model.norm.weight.fill_(float("nan"))
    with pytest.raises(ValueError, match="NaN or inf logits"):
        generate(pair, "Hello", rule="v3", alpha=0.3, max_new_tokens=4, temperature=temperature)


def test_mismatched_tokenizers_are_refused():
    from transformers import PreTrainedTokenizerFast
    from tokenizers import Tokenizer, models

    other = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE(vocab={"a": 0, "b": 1}, merges=[])))
    with pytest.raises(ValueError, match="different tokenizers"):
        check_same_tokenizer(ascii_tokenizer(), other, "big", "small")
    check_same_tokenizer(ascii_tokenizer(), ascii_tokenizer(), "big", "small")


@pytest.mark.parametrize("kwargs, message", [
    (dict(temperature=-1.0), "temperature must be 0 \\(greedy\\) or a number from 0.01 to 10"),
    (dict(rule="lossy", alpha=1.0), "outside rule 'lossy'"),
    (dict(rule="bild", alpha=11.0), "outside rule 'bild'"),
    (dict(alpha=float("nan")), "alpha must be a finite number"),
    (dict(rule="opt", alpha=float("inf")), "alpha must be a finite number"),
])
def test_settings_are_checked(kwargs, message):
    with pytest.raises(ValueError, match=message):
        generate(tiny_pair(), "Hello", **{"rule": "v3", "alpha": 0.3, **kwargs})
