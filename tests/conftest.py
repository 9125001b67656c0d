import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest
import torch

from cascade_core.models import tiny_pair


@pytest.fixture(scope="session")
def tiny64():
    """The tiny pair in float64, so cached and recomputed logits agree to ~1e-15."""
    return tiny_pair(dtype=torch.float64)


@pytest.fixture(scope="session")
def bundled():
    from cascade_core import load_pair

    return load_pair("bundled", progress=lambda m: None)
