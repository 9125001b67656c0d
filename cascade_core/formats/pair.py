"""A draft and a target that share one tokenizer, as the engine reads them. Its own module so that the
transformers entry (and its Hub export) needs the engine and this, not the loaders."""
from dataclasses import dataclass, field

import torch

from cascade_core.decoding.draft_protocol import kind_of
from cascade_core.formats.precision import precision_of, said


@dataclass
class Pair:
    name: str
    target: torch.nn.Module
    draft: torch.nn.Module
    tokenizer: object
    vocab_size: int  # the shared tokenizer vocabulary both models' logits are compared on
    eos_token_ids: set
    max_positions: int
    description: str = ""
    kernels: dict | None = None  # the measured matrix-product choice (see kernels.py), where one was made
    compiled: dict | None = None  # compiled forwards by role (see compiled.py): decoding then uses static caches
    prices: dict = field(default_factory=dict, repr=False)  # measured call seconds by (role, tokens): prices.py
    # the engine's own seconds per block beyond the model calls, measured once (batch.measure_overhead)
    overhead: float | None = field(default=None, repr=False)
    asked_precision: str | None = None  # what the loader was asked for (precision.py); None: the models as given
    precision_timings: dict | None = field(default=None, repr=False)  # what "auto" read, by role
    weights: str = ""  # where the weights came from, in words

    @property
    def precision(self):
        """What ran, strict JSON (traces record it): each model's precision, what was asked, where the weights came
        from."""
        return {"target": precision_of(self.target), "draft": precision_of(self.draft),
                "asked": self.asked_precision, "weights": self.weights}

    @property
    def ran_on(self):
        """The pair in words with its precision, as the page names what ran."""
        return f"{self.description or self.name} · {said(self)}"

    @property
    def drafting(self):
        """The Draft implementation for this pair's draft (cascade_core/decoding/draft_protocol.py): what it can do, and
        how it drafts."""
        return kind_of(self.draft)

    @property
    def draft_kind(self):
        """'head' where the draft reads the target's hidden states (EAGLE-3), 'model' where it runs alone."""
        return self.drafting.name


def eos_ids(tokenizer, model):
    ids = {tokenizer.eos_token_id} if tokenizer is not None and tokenizer.eos_token_id is not None else set()
    config_eos = model.generation_config.eos_token_id if model.generation_config else None
    ids |= set(config_eos if isinstance(config_eos, list) else [config_eos] if config_eos is not None else [])
    return ids


def make_pair(name, target, draft, tokenizer=None, description=""):
    """A Pair from loaded models. Without a tokenizer (transformers' custom_generate) texts stay empty."""
    widths = (target.config.vocab_size, draft.config.vocab_size)
    # Padded embeddings (Qwen sizes) are wider than the tokenizer; compare on what both can emit.
    vocab = min(len(tokenizer) if tokenizer is not None else min(widths), *widths)
    max_positions = min(getattr(m.config, "max_position_embeddings", 4096) for m in (target, draft))
    return Pair(name, target, draft, tokenizer, vocab, eos_ids(tokenizer, target), max_positions, description)
