"""Which product a decoding step's Linear layers use on the CPU, chosen by timing both on the loaded model.

Decoding multiplies 1 to gamma + 1 rows by every weight: memory-bound products whose fastest BLAS path
differs between CPUs and shapes. On one project machine (AVX-512/AMX) ``W @ x^T`` beat ``F.linear`` for every
row count; on a 2-core AVX2 EPYC one cached layer is slower that way, yet over the whole bundled target,
streamed from memory, it is on par for one row and faster for several (docs/benchmarks.md, "Measured choices"). So nothing is
assumed: ``choose_kernels`` times both over the model's own weights for every row count a block can have,
keeps transformers' ``F.linear`` unless ``W @ x^T`` is clearly faster, and caches the verdict per machine (CPU,
its flags, torch version, dtype and weight shapes). Only the BLAS's summation order can differ between them.

One row has a third candidate, ``padded``: the row twice through ``W @ x^T``, keeping the first. Where a
two-row product streams the weights faster than the BLAS's one-row path (the 2-core AVX2 EPYC), target-only
decoding and every draft call take it.

The draft stays in the target's dtype: float16 made the bundled draft's call faster, but a batched row's q then
differed from its solo run's by 2.5e-3 in TV (float16 rounds the products of 1 and of n
rows differently), so Compare's rows would part from the runs Explore shows for the same settings.
"""
import json
import platform
import time

import torch
import torch.nn.functional as F

ROW_COUNTS = range(1, 18)  # a block verifies at most MAX_GAMMA + 1 = 17 positions
MARGIN = 0.9  # W @ x^T is chosen only where it takes under 90% of F.linear's time
SAMPLE_BYTES = 160 * 2**20  # timed weights: far more than any cache, so they stream from memory as in decoding


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
    # a transposed B much faster than a contiguous [k, rows] one (docs/benchmarks.md, "Measured choices").
    flat = x.reshape(-1, x.shape[-1]).contiguous()
    return (weight @ flat.T).T.reshape(*x.shape[:-1], weight.shape[0])


def _padded(x, weight):
    """One row's y = x W^T computed from two copies of the row through ``_thin``."""
    flat = x.reshape(1, x.shape[-1])
    return _thin(torch.cat([flat, flat]), weight)[:1].reshape(*x.shape[:-1], weight.shape[0])


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
    """Fastest seconds of one pass over the weights with F.linear and with W @ x^T (and, for one row, padded to
    two), runs alternating. The fastest, not the median: a burst of another job's load only adds time, and a
    verdict is kept for good (one timed in a burst once kept this VM's one-row decoding on the slow path:
    docs/benchmarks.md, "The default, prompt by prompt")."""
    inputs = {w.shape[1]: torch.randn(rows, w.shape[1], dtype=w.dtype) for w in weights}
    paths = {"linear": lambda x, w: F.linear(x, w), "thin": _thin, **({"padded": _padded} if rows == 1 else {})}
    times = {name: [] for name in paths}
    with torch.inference_mode():
        for _ in range(repeats + 1):  # the first round warms up, and is dropped
            for name, path in paths.items():
                start = time.perf_counter()
                for w in weights:
                    path(inputs[w.shape[1]], w)
                times[name].append(time.perf_counter() - start)
    return {name: min(t[1:]) for name, t in times.items()}


def choose_kernels(model, verdicts_path):
    """{"timings": {rows: {"linear": s, "thin": s, ...}}, "thin_rows": [...], "pad_one_row": bool}: the row counts
    that use W @ x^T, and whether one row goes padded, measured once per machine and model shape, then read from
    the verdicts file."""
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    shapes = sorted({tuple(m.weight.shape) for m in linears})
    key = json.dumps([cpu_description(), torch.__version__, "linear, thin, padded; fastest of 5", str(model.dtype),
                      shapes])
    path = verdicts_path
    verdicts = json.loads(path.read_text()) if path.exists() else {}
    if key not in verdicts:
        weights = _sample(linears)
        timings = {rows: time_paths(weights, rows) for rows in ROW_COUNTS}
        thin = [rows for rows, t in timings.items() if t["thin"] < MARGIN * t["linear"]]
        one = timings[1]
        verdicts[key] = {"cpu": cpu_description(), "timings": timings, "thin_rows": thin,
                         "pad_one_row": one["padded"] < MARGIN * min(one["linear"], one["thin"])}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(verdicts, indent=1))
    return verdicts[key]


def _measured_linear_forward(self, x):
    rows = x.numel() // x.shape[-1]
    if rows == 1 and self.pad_one_row:
        y = _padded(x, self.weight)
    elif rows in self.thin_rows:
        y = _thin(x, self.weight)
    else:
        return F.linear(x, self.weight, self.bias)
    return y if self.bias is None else y + self.bias


def use_measured_kernels(model, kernels):
    """Route each Linear's products as the verdict says: row counts in its thin_rows through W @ x^T, one row
    padded where pad_one_row; the rest stay F.linear."""
    thin_rows, pad_one_row = frozenset(int(r) for r in kernels["thin_rows"]), bool(kernels.get("pad_one_row"))
    if model.device.type != "cpu" or not (thin_rows or pad_one_row):
        return model
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.thin_rows, module.pad_one_row = thin_rows, pad_one_row
            module.forward = _measured_linear_forward.__get__(module)
    return model
