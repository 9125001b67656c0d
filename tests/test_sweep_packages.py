"""`python -m sweeps` checks its optional packages (rouge_score for prompts with references, ray for --ray) before
any model loads, and names the command that installs them (issue 64: in `make run`'s environment the README's sweep
crashed on rouge_score after a 59 s chain)."""
import json
import sys

import pytest

from sweeps.__main__ import main
from sweeps.packages import check_packages

INSTALL = "install it with `make setup-dev` (or `pip install -r requirements-dev.txt`)"


@pytest.fixture
def no_model(monkeypatch):
    def load(spec):
        raise AssertionError(f"the sweep loaded {spec!r} before checking its packages")
    # the module: sweeps.sweep is its function
    monkeypatch.setattr(sys.modules["sweeps.sweep"], "load_named_pair", load)


def sweep_main(tmp_path, prompt, *args):
    (tmp_path / "p.jsonl").write_text(json.dumps(prompt) + "\n")
    return main(["--pair", "tiny", "--prompts", str(tmp_path / "p.jsonl"), "--rules", "v3", "--alphas", "0.5",
                 "--out", str(tmp_path / "out"), *args])


@pytest.mark.parametrize("prompt, args, module, sentence", [
    ({"prompt": "Say hi", "reference": "Hi"}, [], "rouge_score.rouge_scorer",
     "the rouge_score package (ROUGE-L scores the prompts' references)"),
    ({"prompt": "Say hi"}, ["--ray"], "ray", "the ray package (--ray and --ray-address run the chains on Ray)"),
])
def test_a_missing_package_is_one_sentence_before_any_model_loads(tmp_path, capsys, monkeypatch, no_model, prompt,
                                                                    args, module, sentence):
    monkeypatch.setitem(sys.modules, module, None)  # its import fails, as where it is not installed
    assert sweep_main(tmp_path, prompt, *args) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert errors == [f"error: this sweep needs {sentence}, which is not installed here: {INSTALL}"]
    assert not (tmp_path / "out").exists()  # nothing computed, nothing written


def test_a_sweep_asks_only_for_the_packages_it_uses(monkeypatch):
    for module in ("rouge_score.rouge_scorer", "ray"):
        monkeypatch.setitem(sys.modules, module, None)
    check_packages([{"prompt": "Say hi", "reference": None, "answer": 3}], ray=False)
