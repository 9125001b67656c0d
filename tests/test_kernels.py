"""The CPU's product paths (cascade_core/kernels.py): the same numbers as F.linear, and a verdict that a burst of
another tenant's load during the measurement does not decide."""
import types

import torch
import torch.nn.functional as F

from cascade_core import kernels


def test_every_path_computes_the_linear_product():
    torch.manual_seed(0)
    weight = torch.randn(96, 64)
    for rows in (1, 2, 5):
        x = torch.randn(1, rows, 64)
        expected = F.linear(x, weight)
        assert torch.allclose(kernels._thin(x, weight), expected, atol=1e-5)
        if rows == 1:
            assert torch.allclose(kernels._padded(x, weight), expected, atol=1e-5)


def test_bursts_in_most_rounds_do_not_decide_the_verdict(monkeypatch):
    """Rounds alternate linear, thin, padded; three of the five timed rounds catch padded in a 100x burst (the
    measurement that once kept one-row decoding 1.8x slower than it could be). The fastest round is kept, so
    padded still times at its own speed and wins one row."""
    own = {"linear": 2.0, "thin": 2.0, "padded": 1.0}
    bursts = {(r, "padded"): 100.0 for r in (1, 2, 3)}
    clock = types.SimpleNamespace(now=0.0, calls=0)
    schedule = [(r, name) for r in range(6) for name in own]  # warm-up round 0, then 5 timed rounds

    def perf_counter():
        clock.calls += 1
        if clock.calls % 2 == 0:  # the end of a timed pass: advance by that pass's cost
            r, name = schedule[clock.calls // 2 - 1]
            clock.now += own[name] * bursts.get((r, name), 1.0)
        return clock.now

    monkeypatch.setattr(kernels, "time", types.SimpleNamespace(perf_counter=perf_counter))
    times = kernels.time_paths([torch.zeros(4, 4)], rows=1)
    assert times == own
    assert times["padded"] < kernels.MARGIN * min(times["linear"], times["thin"])


def test_measured_routing_follows_the_verdict():
    layer = torch.nn.Linear(64, 32, bias=True)
    model = types.SimpleNamespace(device=torch.device("cpu"), modules=lambda: [layer])
    kernels.use_measured_kernels(model, {"thin_rows": [3], "pad_one_row": True})
    for rows in (1, 2, 3):
        x = torch.randn(rows, 64)
        assert torch.allclose(layer(x), F.linear(x, layer.weight, layer.bias), atol=1e-5)
    assert layer.thin_rows == frozenset({3}) and layer.pad_one_row
