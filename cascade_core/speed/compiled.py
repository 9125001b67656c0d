"""The static-cache decode path, as gpt-fast runs it: preallocated KV caches and ``torch.compile``d forwards for
the shapes decoding repeats (the draft's one-token step, the target's (gamma+1)-token verification); on CUDA
with CUDA graphs ("reduce-overhead"). A rejection rewinds a static cache's position (``crop``) instead of
freeing memory. Prompts run eagerly; a short last block is padded to the compiled shape, and the padding's
cache entries rewound at once.
"""
from dataclasses import replace

import torch
from transformers import StaticCache

CACHE_LENGTHS = (512, 1024, 2048, 4096, 8192)  # one compiled graph per length used: a few sizes, not every length


class CompiledModel:
    """One model's compiled forward; new shapes (gamma + 1, a cache length) compile on first use."""

    def __init__(self, model):
        self.model = model
        mode = "reduce-overhead" if model.device.type == "cuda" else None
        self.forward = torch.compile(model.forward, mode=mode, dynamic=False)

    def cache(self, length):
        """A static cache of the smallest standard length that holds ``length`` positions."""
        size = next((n for n in CACHE_LENGTHS if n >= length), length)
        return StaticCache(config=self.model.config, max_cache_len=size)


def compile_pair(pair):
    """A copy of the pair (the same models) with compiled forwards for both (``pair.compiled``): the engine then
    decodes with static caches. Compiling happens on each model's first call of each shape."""
    if not pair.drafting.compiles:
        raise ValueError(f"compiled=True compiles an independent draft's forward; this pair's draft is "
                         f"{pair.drafting.described}, and decodes eagerly (load it without compiled=True)")
    return replace(pair, compiled={"target": CompiledModel(pair.target), "draft": CompiledModel(pair.draft)},
                   prices={})  # its calls cost what the compiled path costs
