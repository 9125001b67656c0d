import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest
import torch

from browser import free_port
from cascade_core.formats.loading import tiny_pair


@pytest.fixture(scope="session")
def tiny64():
    """The tiny pair in float64, so cached and recomputed logits agree to ~1e-15."""
    return tiny_pair(dtype=torch.float64)


@pytest.fixture(scope="session")
def tiny64_sub(tiny64):
    """tiny64 with the draft's head over two thirds of the vocabulary (end-of-text and every third id left out):
    the draft can never propose those, so only the residual can emit them."""
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


# -- The suite's tiers (pytest -m; `make test-fast` runs none of them) ------------------------------------------------
# Read off what a test needs (the fixtures it uses, transitively, and its module), so no test has to remember its own.
SERVERS = {"tiny_app_url", "fair_app", "slow_app", "counted_app"}  # each serves the app on a port of its own
PROCESS_MODULES = {"test_bench", "test_hub_export", "test_space"}  # they start Python processes of their own
SLOW_MODULES = {"test_sweeps", "test_precision", "test_replay", "test_distill", "test_distill_head",
                "test_reproducible", "test_stopping"}  # many runs of 10 s or more
# The engine's chi-square tests (thousands of sampled runs a rule, ~16 s each): the distributions' own chi-square
# and the token-for-token reference loop stay in the quick loop
SLOW_TESTS = {"test_engine_first_token_follows_pi", "test_emitted_token_follows_pi_with_a_head"}


def tiers(item):
    """The marks of one test: browser (chromium), process (a server or a Python process of its own), ray, compile
    (the compiled path or CUDA), bundled (the bundled SmolLM2 pair), slow (a module of many long runs)."""
    names, module = set(item.fixturenames), item.path.stem
    found = {"browser": module.startswith("test_browser"),
             "process": bool(names & SERVERS) or module in PROCESS_MODULES,
             "ray": "local_ray" in names, "compile": module in ("test_compiled", "test_cuda"),
             "bundled": "bundled" in names or module == "test_bundled",
             "slow": module in SLOW_MODULES or item.originalname in SLOW_TESTS}
    return [mark for mark, holds in found.items() if holds]


def pytest_collection_modifyitems(items):
    for item in items:
        for mark in tiers(item):
            item.add_marker(mark)


def sub_vocabulary_pair(pair, token_ids):
    """The pair with its draft's head over token_ids only (the bundled draft's FR-Spec head, on any pair)."""
    import copy
    from dataclasses import replace

    from cascade_core.formats.shipped_draft import SubVocabularyHead

    draft = copy.deepcopy(pair.draft)
    draft.lm_head = SubVocabularyHead(draft.lm_head.weight, torch.tensor(token_ids), draft.config.vocab_size)
    return replace(pair, draft=draft, prices={})
