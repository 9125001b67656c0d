"""The explorer in its own process, as users run it (``python app.py``), for the benchmarks that measure it."""
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.browser import free_port

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def app_process(pair, *args, root=ROOT):
    """(URL, pid) of ``python app.py --pair <pair>`` on a free loopback port, once it answers; stopped afterwards.
    ``root``: the checkout whose app runs (another commit's worktree, for an A/B)."""
    with served([str(Path(root) / "app.py"), "--pair", pair, *args], root) as running:
        yield running


@contextmanager
def served(script, root=ROOT):
    """(URL, pid) of ``python <script...> --port <a free loopback port>``, once it answers; stopped afterwards."""
    port = free_port()
    server = subprocess.Popen([sys.executable, *script, "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=root)
    url = f"http://127.0.0.1:{port}/"
    try:
        for _ in range(600):
            try:
                if httpx.get(url, timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        else:
            raise SystemExit(f"{' '.join(script)} did not start within 5 minutes")
        yield url, server.pid
    finally:
        server.kill()
        server.wait()
