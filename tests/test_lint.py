"""ruff finds nothing, with pyproject.toml's [tool.ruff] (lines of 120 characters at most; pycodestyle's E and W,
pyflakes' F), as `make lint` runs it.

It runs ruff's own binary, not a Python process, so it stays in the quick loop (about a tenth of a second), and skips
with the reason where ruff is not installed (requirements-dev.txt pins it).
"""
import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def ruff_findings():
    """['path:row:column: code message'] for every finding in the checkout, paths relative to its root."""
    ruff = pytest.importorskip("ruff.__main__", reason="ruff is not installed: `make setup-dev` installs it")
    result = subprocess.run([ruff.find_ruff_bin(), "check", "--output-format", "json", "."], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode in (0, 1), f"ruff could not run: {result.stderr}"
    return [f"{Path(f['filename']).relative_to(ROOT).as_posix()}:{f['location']['row']}:{f['location']['column']}: "
            f"{f['code']} {f['message']}" for f in json.loads(result.stdout)]


def test_ruff_finds_nothing():
    found = ruff_findings()
    assert not found, f"{len(found)} ruff findings (`make lint`):\n" + "\n".join(found)
