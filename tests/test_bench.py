"""The benchmark runs end to end (tiny pair, few tokens) and writes its markdown section."""
import subprocess
import sys


def test_bench_smoke(tmp_path):
    out = tmp_path / "bench.md"
    r = subprocess.run([sys.executable, "-m", "cascade_core", "bench", "--pair", "tiny", "--runs", "2",
                        "--max-new-tokens", "6", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert "## Engine benchmark on cpu: tiny" in text
    assert "Greedy outputs identical (transformers generate = transformers assisted = ours lossless): **True**" in text
    for name in ("transformers generate (target only)", "transformers assisted (gamma=4)", "ours lossless (gamma=4)",
                 "ours v3 alpha=0.3", "ours opt alpha=0.5"):
        assert name in text
