"""python -m cascade_core hub-export: a folder transformers can load by path or Hub repo id with nothing else
installed, whose generate equals the engine's runs."""
import ast
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import torch

from cascade_core import generate
from cascade_core.formats.eagle3_head import load_head, save_head
from cascade_core.formats.loading import tiny_pair
from cascade_core.formats.pair import make_pair
from cascade_core.method.rules import rules_table
from cascade_core.tools.cli import main
from cascade_core.tools.hub_export import REQUIREMENTS, export, exported_files

ROOT = Path(__file__).resolve().parents[1]
REPO_ID = "someone/speculative-cascades"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def imports(text):
    tree = ast.parse(text)
    return [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]


def test_the_export_is_self_contained():
    files = exported_files(REPO_ID)
    names = {Path(name).stem for name in files if name.startswith("custom_generate/") and name.endswith(".py")}
    assert {"generate", "generation", "cached_model", "rules", "sampling", "pair"} <= names
    assert not {"loading", "cli", "hub_export"} & names  # loaders and tools stay home
    assert {"precision", "kernels"} <= names  # precision="auto" times the models with kernels' verdicts file
    for name, text in files.items():
        if not name.endswith(".py"):
            continue
        for node in imports(text):
            absolute = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] * (node.level == 0)
            assert not any(m and m.split(".")[0] == "cascade_core" for m in absolute), name
            if isinstance(node, ast.ImportFrom) and node.level:
                assert node.module in names, f"{name} imports .{node.module}, which the export lacks"
    assert files["custom_generate/requirements.txt"].split() == sorted(REQUIREMENTS.values())
    card = files["README.md"]
    assert rules_table() in card and f'custom_generate="{REPO_ID}"' in card and "library_name: transformers" in card


def test_the_exports_requirements_are_pyprojects():
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert set(REQUIREMENTS.values()) <= set(dependencies)


def test_the_cli_writes_the_folder_and_a_re_export_removes_stale_modules(tmp_path, capsys):
    (tmp_path / "custom_generate").mkdir()
    (tmp_path / "custom_generate" / "gone.py").write_text("old = 1\n")
    assert main(["hub-export", str(tmp_path), "--repo-id", REPO_ID]) == 0
    assert f"hf upload {REPO_ID} {tmp_path} ." in capsys.readouterr().out
    assert not (tmp_path / "custom_generate" / "gone.py").exists()
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()) == sorted(exported_files())


def fake_hub_repo(cache, folder):
    """The export as huggingface_hub's cache holds a downloaded repo, so that offline transformers resolves the
    repo id (and fetches each relatively imported file) exactly as after a download."""
    repo = cache / f"models--{REPO_ID.replace('/', '--')}"
    shutil.copytree(folder, repo / "snapshots" / COMMIT)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)


def test_generate_by_folder_and_by_repo_id_where_cascade_core_is_not_importable(tmp_path):
    pair = tiny_pair()
    for role in ("target", "draft"):
        getattr(pair, role).save_pretrained(tmp_path / "models" / role)
    pair.tokenizer.save_pretrained(tmp_path / "models" / "target")
    save_head(tiny_pair(draft_kind="head").draft, tmp_path / "models" / "head")
    export(tmp_path / "export", REPO_ID)
    fake_hub_repo(tmp_path / "hub", tmp_path / "export")
    clean = tmp_path / "clean"
    clean.mkdir()
    shutil.copy(ROOT / "tests" / "hub_user.py", clean)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(tmp_path / "hub"), HF_MODULES_CACHE=str(tmp_path / "modules"))
    folder = str(tmp_path / "export")
    done = subprocess.run([sys.executable, "hub_user.py", str(tmp_path / "models"), folder, REPO_ID, "out.json"],
                          cwd=clean, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((clean / "out.json").read_text())
    loaded = [str(p) for p in (tmp_path / "modules").rglob("generation.py")]
    assert len(loaded) == 2 and any(COMMIT in p for p in loaded), loaded  # by folder, and from the repo's commit

    tokenizer = pair.tokenizer
    tokenizer.pad_token, tokenizer.padding_side = tokenizer.eos_token, "left"
    prompt = tokenizer("Who is Buzz Aldrin?")["input_ids"]
    torch.manual_seed(5)
    seed = int(torch.randint(0, 2**31 - 1, ()))
    seeded = generate(pair, prompt_ids=prompt, rule="v3", alpha=0.25, seed=seed, max_new_tokens=32).tokens
    streamed = generate(pair, prompt_ids=prompt, seed=2, max_new_tokens=30).tokens
    for source in (folder, REPO_ID):
        run = results[source]
        assert run["seeded"] == [prompt + seeded], source
        assert run["greedy"] == results["greedy_target"], source
        width = len(run["batch_input"][0])
        for row, ids in zip(run["batched"], run["batch_input"]):
            own = [t for t in ids if t != tokenizer.pad_token_id]
            solo = generate(pair, prompt_ids=own, seed=11, max_new_tokens=20).tokens
            assert row[:width] == ids and row[width: width + len(solo)] == solo, source
            assert set(row[width + len(solo):]) <= {tokenizer.pad_token_id}
        assert run["streamed"] == [prompt + streamed] == run["dict_sequences"] and run["dict_type"] == \
            "GenerateDecoderOnlyOutput"
        assert run["printed"].strip() == tokenizer.decode(streamed).strip()
    head_pair = make_pair("tiny+head", pair.target, load_head(tmp_path / "models" / "head", pair.target), tokenizer)
    with_head = generate(head_pair, prompt_ids=prompt, rule="v3", alpha=0.25, gamma=3, seed=seed, max_new_tokens=32)
    assert results["head"]["seeded"] == [prompt + with_head.tokens]
    assert results["head"]["greedy"] == results["greedy_target"]
