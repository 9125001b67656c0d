"""The Hugging Face Space's contract (ZeroGPU), checked offline: the README's front matter and the two requirement
sets, `spaces` imported before torch, GPU durations that follow the request, and the app as a Space builds it:
public mode, the seed's pair by default, a refused download in one line, the offline pairs still served."""
import io
import pickle
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import gradio
import pytest
import torch

import app.gpu
from app.explore import ExploreHandlers
from app.settings import AppSettings
from app.layout import QUEUE_SIZE
from app.pairs import SEED_PAIR, PairCache, drafts_with_a_head
from cascade_core.formats.loading import parse_pair, with_draft
from test_app import SETTINGS, run_to_end

ROOT = Path(__file__).resolve().parent.parent
TEST_ONLY = {"pytest", "playwright", "ray", "rouge-score", "spaces"}
PROVIDED_BY_THE_SPACE = {"gradio", "spaces", "huggingface_hub", "huggingface-hub"}


def front_matter():
    text = (ROOT / "README.md").read_text()
    block = text.split("---\n")[1]
    return block


def requirements(name):
    lines = [line.split("#")[0].strip() for line in (ROOT / name).read_text().splitlines()]
    return {re.split(r"[=<>\[ ]", line)[0].lower(): line for line in lines if line and not line.startswith("-r")}


def test_front_matter_is_what_zerogpu_runs():
    block = front_matter()
    assert 'python_version: "3.12"' in block  # ZeroGPU: 3.10.13 or 3.12.12; transformers 5.24 needs >= 3.11
    assert re.search(r"^sdk: gradio$", block, re.M)
    assert re.search(rf"^sdk_version: {re.escape(gradio.__version__)}$", block, re.M)  # tested as it is deployed
    preloaded = re.findall(r"^  - (\S+)$", block.split("preload_from_hub:")[1], re.M)
    # the Space's default pair (the seed's target with its published head) and the seed's draft, downloaded at build
    assert sorted(preloaded) == sorted({*parse_pair(SEED_PAIR).values(),
                                        *parse_pair(with_draft(SEED_PAIR, "head")).values()})
    assert "sdk_version" in (ROOT / "Makefile").read_text()  # make run installs the gradio the Space runs
    assert QUEUE_SIZE  # a queue without max_size is forced to one at a time on ZeroGPU


def test_requirements_runtime_and_tests_apart():
    runtime, dev = requirements("requirements.txt"), requirements("requirements-dev.txt")
    assert not runtime.keys() & (TEST_ONLY | PROVIDED_BY_THE_SPACE)
    torch = runtime["torch"]
    version = re.fullmatch(r"torch==2\.(\d+)\.\d+", torch)
    assert version and 8 <= int(version.group(1)) <= 13, torch  # a version ZeroGPU lists, never a +cpu build
    assert "-r requirements.txt" in (ROOT / "requirements-dev.txt").read_text()
    assert TEST_ONLY <= dev.keys()


def test_the_app_imports_spaces_before_torch():
    order = subprocess.run([sys.executable, "-c", """
import sys
seen = []
class Watch:
    def find_spec(self, name, path=None, target=None):
        if name in ("spaces", "torch") and name not in seen:
            seen.append(name)
sys.meta_path.insert(0, Watch())
import app
print(",".join(seen))
"""], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert order.stdout.strip().splitlines()[-1] == "spaces,torch", order.stderr[-2000:]


def test_runtime_requirements_run_the_app_without_test_packages():
    check = subprocess.run([sys.executable, "-c", """
import sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("rouge_score", "ray", "playwright", "pytest"):
            raise ImportError(f"{name} is not a runtime requirement")
sys.meta_path.insert(0, Refuse())
from app import build_app
from cascade_core import generate
from app.compare import row_stats
from app.pairs import PairCache
pairs = PairCache()
build_app("tiny", pairs=pairs)
from sweeps.chain import row
item = dict(prompt_id="0", category=None, reference=None, answer=None)
print(row(pairs.get("tiny"), item, generate(pairs.get("tiny"), "Hi", max_new_tokens=4), 0.3)["tokens"])
"""], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert check.returncode == 0 and check.stdout.strip().endswith("4"), check.stderr[-2000:]


def test_gpu_durations_follow_the_request(monkeypatch):
    # a stand-in for spaces whose GPU(fn, duration) hands back the duration callable, to be asked directly
    monkeypatch.setattr(app.gpu, "spaces", SimpleNamespace(GPU=lambda fn, duration: duration))

    def compare(self, prompt, gamma, temperature, seed, max_new_tokens, cost_ratio, *cells):
        pass

    duration = app.gpu.gpu(lambda a: sum(1 for rule in a["cells"][::2] if rule) * a["max_new_tokens"])(compare)
    cells = ["v3", 0.5, "chow", 0.5, "", 0.0]
    assert duration(None, "Hi", 4, 1.0, 0, 100, 0.25, *cells) == app.gpu.gpu_seconds(200) == 22
    assert duration(None, "Hi", 4, 1.0, 0, "many", 0.25, *cells) == app.gpu.DEFAULT_SECONDS  # refused by the call
    assert app.gpu.gpu_seconds(64) < 20 and app.gpu.gpu_seconds(1024) < 120  # a 64-token run costs little quota
    # a run asks by its draft: with a head a block is about one target forward
    head = app.gpu.gpu(lambda a: a["max_new_tokens"], lambda a: drafts_with_a_head(a["spec"], a["draft"]))
    duration = head(lambda spec, draft, max_new_tokens: None)
    assert duration(SEED_PAIR, "head", 500) == app.gpu.gpu_seconds(500, head=True) == 20
    assert duration(SEED_PAIR, "model", 500) == duration("bundled", "model", 500) == app.gpu.gpu_seconds(500) == 40
    assert duration("bundled", "head", 500) == duration("AngelSlim/Qwen3-1.7B_eagle3 -> Qwen/Qwen3-1.7B", "", 500) == 20


def space_environment(monkeypatch):
    monkeypatch.setenv("SPACE_ID", "someone/speculative-cascades")
    monkeypatch.setenv("SYSTEM", "spaces")


def test_on_a_space_the_app_is_public_and_defaults_to_the_seed_pair(monkeypatch):
    space_environment(monkeypatch)
    script = __import__("test_app").load_script()
    args = script.parse_args([])
    assert script.public_mode(args)
    from app.layout import build_app, default_pair_spec

    assert default_pair_spec() == SEED_PAIR
    demo = build_app()
    explore_pair = next(c for c in demo.blocks.values() if getattr(c, "elem_id", None) == "pair")
    assert explore_pair.value == SEED_PAIR
    explore_draft = next(c for c in demo.blocks.values() if getattr(c, "elem_id", None) == "draft")
    assert explore_draft.value == "head"  # the seed's target with its published EAGLE-3 head; the draft model next


def test_offline_the_seed_pair_is_refused_in_one_line_and_the_offline_pairs_still_run(monkeypatch):
    space_environment(monkeypatch)
    handlers = ExploreHandlers(PairCache(public=True), SEED_PAIR)
    with pytest.warns(UserWarning) as toast:
        view = run_to_end(handlers, pair=SEED_PAIR)
    message = str(toast[-1].message)
    assert "downloads are off (HF_HUB_OFFLINE=1)" in message and "\n" not in message
    for pair in ("tiny", "bundled"):
        view = run_to_end(handlers, pair=pair, max_new_tokens=4)
        assert len(view.run.trace.tokens) == 4 and view.status.startswith("Done")


class NoTensors(pickle.Pickler):
    """Pickles as ZeroGPU does what a GPU function yields, refusing any torch tensor (it would travel as a CUDA
    tensor from the GPU process)."""

    def persistent_id(self, obj):
        if isinstance(obj, torch.Tensor):
            raise AssertionError(f"a tensor of shape {tuple(obj.shape)} in a yielded value")
        return None


def test_what_the_gpu_functions_yield_holds_no_tensor():
    handlers = ExploreHandlers(PairCache(), "tiny")
    views = list(handlers.run(*{**SETTINGS, "max_new_tokens": 12}.values()))
    s = AppSettings.from_inputs("Hi", "tiny", True, "v3", 0.5, 4, 1.0, 12, 0)
    messages = list(handlers._trace_messages(s)) + list(handlers._block_messages(s, 1))
    replays = list(handlers.open_block(views[-1].run, 3))
    for value in views + messages + replays:
        NoTensors(io.BytesIO()).dump(value)
    assert len(views[-1].run.trace.tokens) == 12 and messages[-1][0]  # the run's last view, and /block's result
    assert replays[-1][0][0]["emitted"]  # the step-through's replay
