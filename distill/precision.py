"""The arithmetic distillation runs in: bfloat16 autocast where the machine is faster in it, float32 elsewhere."""
import functools
import time

import torch


@functools.cache
def bfloat16_is_faster(device_type):
    """Whether this machine multiplies matrices of a training step's shapes faster in bfloat16 than in float32:
    always on CUDA; on a CPU where it has matrix units for it (AMX: 3.8x on a 2-core Xeon of this project), which
    the timing tells, not the flags.
    Timed once per process, best of five products of each."""
    if device_type == "cuda":
        return True
    a, b = torch.randn(2048, 576), torch.randn(576, 2048)

    def best(x, y):
        times = []
        for _ in range(5):
            start = time.perf_counter()
            x @ y
            times.append(time.perf_counter() - start)
        return min(times)

    return best(a.bfloat16(), b.bfloat16()) < 0.8 * best(a, b)


def precision(device):
    """bfloat16 autocast where the machine is faster in it (CUDA, a CPU with AMX), plain float32 elsewhere."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=bfloat16_is_faster(device.type))
