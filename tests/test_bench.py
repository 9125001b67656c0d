"""The benchmark runs end to end (tiny pair, few tokens) and writes its markdown section."""
import subprocess
import sys
from pathlib import Path

from bench.markdown import write_section


def test_bench_smoke(tmp_path):
    out = tmp_path / "bench.md"
    r = subprocess.run([sys.executable, str(Path(__file__).parents[1] / "bench" / "engine_bench.py"), "--pair", "tiny",
                        "--runs", "2", "--max-new-tokens", "6", "--no-compile", "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert "## Engine benchmark on cpu: tiny pair" in text
    assert "Greedy outputs identical (transformers generate = transformers assisted = ours lossless, every path): " \
           "**True**" in text
    for name in ("transformers generate (target only)", "transformers assisted", "ours lossless", "ours v3 alpha=0.3",
                 "ours opt alpha=0.5", "records skipped"):
        assert name in text


def test_write_section_replaces_by_key_whatever_the_numbers_in_the_title(tmp_path):
    """A re-run whose title carries new numbers (the draft's 1 - TV) replaces its old section where it stands."""
    path, key = tmp_path / "b.md", "## Engine benchmark on cpu: bundled pair"
    write_section(path, f"{key}, draft (1 - TV 0.33)\n\nold\n", key)
    write_section(path, "## Bundled draft: draft (1 - TV 0.33)\n\nreport\n", "## Bundled draft:")
    write_section(path, f"{key}, draft (1 - TV 0.41)\n\nnew\n", key)
    text = path.read_text()
    assert text.count(key) == 1
    assert "old" not in text
    assert text.index(f"{key}, draft (1 - TV 0.41)\n\nnew") < text.index("## Bundled draft: draft (1 - TV 0.33)")
