"""Where 14 short /run calls sent together spend their time on an idle server: the server sampled by py-spy, the
callers' own CPU counted, so a latency can be read as the server's work, the callers' or the wait between them.

    pip install py-spy; HF_HUB_OFFLINE=1 python bench/short_calls_profile.py [--pair tiny] [--bursts 3]
                                                                            [--callers plain]

The calls are load_test.py's short ones (16 tokens, v3 0.3, gamma 4, T 1), each caller connected before the clock
starts (gradio_client Clients, or plain HTTP: load_test.callers). Prints the bursts' latencies, the callers' CPU
seconds per burst and, per server thread, the share of the sampled wall time it was running, with the frames that
held it.
"""
import argparse
import collections
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.load_test import callers, request, sent_together  # noqa: E402
from bench.server import app_process  # noqa: E402

RATE = 200  # py-spy samples per second


def burst(clients, tokens):
    """(latencies, the callers' CPU seconds) of one call per client sent together."""
    before = os.times()
    latencies = sent_together(clients, tokens)
    after = os.times()
    return latencies, after.user - before.user + after.system - before.system


def thread_shares(raw, seconds, top=5):
    """{thread: (share of the wall time it ran, the innermost of this repository's frames by the share they held
    it, the leaf frames by the same)} from py-spy's raw (collapsed) output."""
    ours = re.compile(r"\((cascade_core|app|sweeps)/")  # py-spy names a file by its path under sys.path
    running, held, leaves = collections.Counter(), collections.defaultdict(collections.Counter), \
        collections.defaultdict(collections.Counter)
    for line in Path(raw).read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        thread, *frames = stack.split(";")
        thread, n = ("AnyIO workers" if "AnyIO worker" in thread else re.sub(r"thread \(\d+\): ", "", thread)), int(n)
        running[thread] += n
        named = [re.sub(r" \((.*?)(:\d+)?\)$", lambda m: f" ({m.group(1)})", f) for f in frames]
        mine = [f for f in named if ours.search(f)]
        if mine:  # the innermost: where this repository's code hands the time to a library
            held[thread][mine[-1]] += n
        if named:
            leaves[thread][re.sub(r"\(.*/", "(", named[-1])] += n
    ticks = seconds * RATE
    share = lambda counter: [(f, c / ticks) for f, c in counter.most_common(top)]  # noqa: E731
    return {t: (n / ticks, share(held[t]), share(leaves[t])) for t, n in running.most_common()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pair", default="tiny")
    parser.add_argument("--bursts", type=int, default=3)
    parser.add_argument("--calls", type=int, default=14)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--callers", choices=("gradio_client", "plain"), default="gradio_client")
    args = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    raw = Path(tempfile.mkdtemp()) / "server.txt"
    with app_process(args.pair) as (url, pid):
        kind = "gradio_client" if args.callers == "gradio_client" else "plain HTTP"
        clients = callers(url, kind, args.calls)
        alone = statistics.median(clients[0](request(0, args.tokens)) for _ in range(4))
        sampler = subprocess.Popen([spy, "record", "--pid", str(pid), "--rate", str(RATE), "--format", "raw",
                                    "--threads", "--nonblocking", "-o", str(raw)], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        time.sleep(1)  # py-spy attached
        start = time.perf_counter()
        results = [burst(clients, args.tokens) for _ in range(args.bursts)]
        seconds = time.perf_counter() - start
        sampler.send_signal(2)  # py-spy writes its samples on SIGINT
        sampler.wait()
    print(f"one call alone: {alone:.3f} s (py-spy's samples: {raw})")
    for latencies, cpu in results:
        print(f"{args.calls} together: p50 {statistics.median(latencies):.3f} s, max {max(latencies):.3f} s; "
              f"the callers' CPU {cpu:.2f} s")
    # py-spy sampled from its start: the second it was given to attach, then the bursts
    for thread, (share, held, leaves) in thread_shares(raw, seconds + 1).items():
        print(f"{thread}: running {share:.0%} of the wall time")
        for title, frames in (("  our frames", held), ("  leaves", leaves)):
            print(title + ": " + "; ".join(f"{f} {s:.0%}" for f, s in frames))


if __name__ == "__main__":
    main()
