import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest
import torch

from browser import free_port
from cascade_core.models import tiny_pair


@pytest.fixture(scope="session")
def tiny64():
    """The tiny pair in float64, so cached and recomputed logits agree to ~1e-15."""
    return tiny_pair(dtype=torch.float64)


@pytest.fixture(scope="session")
def tiny64_sub(tiny64):
    """tiny64 with the draft's head over two thirds of the vocabulary (end-of-text and every third id left out):
    the draft can never propose those, so only the residual can emit them."""
    from reference import sub_vocabulary_pair

    eos = max(tiny64.eos_token_ids)
    return sub_vocabulary_pair(tiny64, [v for v in range(tiny64.vocab_size) if v % 3 and v != eos])


@pytest.fixture(scope="session")
def bundled():
    from cascade_core import load_pair

    # the tests written for the draft model, in float32 (what "auto" picks depends on the machine's timings)
    return load_pair("bundled", draft="model", precision="fp32", progress=lambda m: None)


@pytest.fixture(scope="session")
def tiny_app_url():
    """The explorer on the tiny pair, launched in-process on a free local port."""
    from app import build_app, launch
    from app.pairs import PairCache

    pairs = PairCache()
    pairs.get("tiny")
    demo = build_app("tiny", pairs=pairs)
    _, url, _ = launch(demo, port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        yield url
    finally:
        demo.close()
