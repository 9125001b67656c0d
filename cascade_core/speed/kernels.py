"""Which product a decoding step's Linear layers use on the CPU, chosen by timing both on the loaded model.

Decoding multiplies 1 to gamma + 1 rows (times a batch's rows) by every weight: memory-bound products whose fastest
BLAS path differs between CPUs and shapes. On one project machine (AVX-512/AMX) ``W @ x^T`` beat ``F.linear`` for
every row count; on a 2-core AVX2 EPYC one cached layer is slower that way, yet over the whole bundled target,
streamed from memory, it is on par for one row and faster for several (docs/design.md, "Measured choices"). So
nothing is assumed: ``choose_kernels`` times both over the model's own weights for every row count a block can have
and caches the timings per machine (CPU, its flags, torch version, dtype and weight shapes); ``routes`` reads them.
precision.py keeps its timings of each weight precision in the same file, the same way (``measured_once``). These
routes are float32's: a layer converted to another precision has its own product.

A row count can also be computed as a larger one: its rows padded with zero rows, the first kept (a row's product
does not read the others). The BLAS's kernels do not get slower with every row (on the EPYC two rows stream the
weights faster than one, four faster than three, sixteen than twelve), so each count takes the fastest path of
any count at or above it: a shorter block's products never cost clearly more than a longer one's, which gamma
"auto" would otherwise have to price. Only the BLAS's summation order can differ between paths.

The draft stays in the target's dtype: float16 made the bundled draft's call faster, but a batched row's q then
differed from its solo run's by 2.5e-3 in TV (float16 rounds the products of 1 and of n
rows differently), so Compare's rows would part from the runs Explore shows for the same settings.
"""
import functools
import json
import os
import platform
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROW_COUNTS = range(1, 18)  # a block verifies at most MAX_GAMMA + 1 = 17 positions
MARGIN = 0.9  # W @ x^T is taken for a count only where it takes under 90% of F.linear's time
PAD_MARGIN = 0.95  # a larger count's path only where it takes under 95% of the count's own (a few % is noise)
SAMPLE_BYTES = 160 * 2**20  # timed weights: far more than any cache, so they stream from memory as in decoding


def cache_dir():
    """Where this machine keeps what it measured and converted (SPECULATIVE_CASCADES_CACHE, or the user's cache)."""
    return Path(os.environ.get("SPECULATIVE_CASCADES_CACHE", Path.home() / ".cache" / "speculative-cascades"))


def verdicts_path():
    """The file of this machine's measured verdicts: the products' routes here, precision.py's choices."""
    return cache_dir() / "kernel-choice.json"


def measured_once(path, key, measure):
    """The verdict kept in ``path`` (JSON) under ``key`` (a list: the CPU, torch version, what was measured on
    which shapes), measured with ``measure()`` (a dict) and written there the first time it is asked for."""
    key = json.dumps(key)
    verdicts = json.loads(path.read_text()) if path.exists() else {}
    if key not in verdicts:
        verdicts[key] = {"cpu": cpu_description(), **measure()}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(verdicts, indent=1))
    return verdicts[key]


def cpu_description():
    """The CPU's model name and the vector-unit flags that decide which BLAS kernels run."""
    name, flags = platform.processor() or platform.machine(), set()
    try:
        for line in open("/proc/cpuinfo"):
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                name = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
                break
    except OSError:
        pass
    vector = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16") if f in flags]
    return f"{name} ({', '.join(vector) or 'no AVX2'})"


def _thin(x, weight):
    """y = x W^T computed as (W x^T)^T."""
    # Row-major rows, whatever layout x arrived in (an earlier product's output is a transposed view): MKL reads
    # a transposed B much faster than a contiguous [k, rows] one (docs/design.md, "Measured choices").
    flat = x.reshape(-1, x.shape[-1]).contiguous()
    return (weight @ flat.T).T.reshape(*x.shape[:-1], weight.shape[0])


PATHS = {"linear": lambda x, w: F.linear(x, w), "thin": _thin}


def routed(x, weight, path, computed):
    """y = x W^T through ``path`` over ``computed`` rows: x's rows, then zero rows up to that count (dropped)."""
    flat = x.reshape(-1, x.shape[-1])
    rows = len(flat)
    if computed > rows:
        flat = torch.cat([flat, flat.new_zeros(computed - rows, flat.shape[-1])])
    return PATHS[path](flat, weight)[:rows].reshape(*x.shape[:-1], weight.shape[0])


def _sample(linears):
    """The largest weights first, up to SAMPLE_BYTES (the output head among them)."""
    weights, total = [], 0
    for w in sorted((m.weight for m in linears), key=lambda w: -w.numel()):
        if total >= SAMPLE_BYTES:
            break
        weights.append(w)
        total += w.numel() * w.element_size()
    return weights


def time_paths(weights, rows, repeats=5):
    """Fastest seconds of one pass over the weights with each of PATHS, runs alternating. The fastest, not the
    median: a burst of another job's load only adds time, and a verdict is kept for good (one timed in a burst once
    kept this VM's one-row decoding on the slow path: docs/lab/2026-12-07-default-speedup.md)."""
    inputs = {w.shape[1]: torch.randn(rows, w.shape[1], dtype=w.dtype) for w in weights}
    times = {name: [] for name in PATHS}
    with torch.inference_mode():
        for _ in range(repeats + 1):  # the first round warms up, and is dropped
            for name, path in PATHS.items():
                start = time.perf_counter()
                for w in weights:
                    path(inputs[w.shape[1]], w)
                times[name].append(time.perf_counter() - start)
    return {name: min(t[1:]) for name, t in times.items()}


def routes(timings):
    """{rows: (path, rows computed)} from {rows: {path: seconds}}: each count's own path (``thin`` where it is
    clearly faster than ``F.linear``: MARGIN), or a larger count's where that is faster still (PAD_MARGIN), padded."""
    plan, above = {}, None  # above: the cheapest (seconds, path, rows) among the counts above this one
    for rows in sorted(timings, key=int, reverse=True):
        t = timings[rows]
        seconds, path = (t["thin"], "thin") if t["thin"] < MARGIN * t["linear"] else (t["linear"], "linear")
        plan[int(rows)] = above[1:] if above and above[0] < PAD_MARGIN * seconds else (path, int(rows))
        if above is None or seconds < above[0]:
            above = (seconds, path, int(rows))
    return plan


def choose_kernels(model, verdicts_path):
    """{"timings": {rows: {"linear": s, "thin": s}}, "routes": {rows: (path, rows computed)}}: measured once per
    machine and model shape, then read from the verdicts file."""
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    shapes = sorted({tuple(m.weight.shape) for m in linears})
    key = [cpu_description(), torch.__version__, "linear and thin per row count; fastest of 5", str(model.dtype),
           shapes]

    def measure():
        weights = _sample(linears)
        return {"timings": {str(rows): time_paths(weights, rows) for rows in ROW_COUNTS}}  # str: as JSON reads them

    verdict = measured_once(verdicts_path, key, measure)
    return {**verdict, "routes": routes(verdict["timings"])}


def _measured_linear_forward(self, routes, x):
    rows = x.numel() // x.shape[-1]
    path, computed = routes.get(rows, ("linear", rows))
    if (path, computed) == ("linear", rows):
        return F.linear(x, self.weight, self.bias)
    y = routed(x, self.weight, path, computed)
    return y if self.bias is None else y + self.bias


def use_measured_kernels(model, kernels):
    """Route each Linear's products as the verdict's routes say; counts it does not name (longer prompts) stay
    F.linear."""
    routes = {int(rows): tuple(route) for rows, route in kernels["routes"].items()}
    if model.device.type != "cpu" or all(route == ("linear", rows) for rows, route in routes.items()):
        return model
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.forward = functools.partial(_measured_linear_forward, module, routes)
    return model
