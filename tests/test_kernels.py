"""The CPU's product paths (cascade_core/speed/kernels.py): the same numbers as F.linear, and a verdict that a burst of
another tenant's load during the measurement does not decide."""
import types

import torch
import torch.nn.functional as F

from cascade_core.speed import kernels


def test_every_path_computes_the_linear_product():
    torch.manual_seed(0)
    weight = torch.randn(96, 64)
    for rows in (1, 2, 5):
        x = torch.randn(1, rows, 64)
        expected = F.linear(x, weight)
        assert torch.allclose(kernels._thin(x, weight), expected, atol=1e-5)
        for path in kernels.PATHS:
            padded = kernels.routed(x, weight, path, rows + 3)
            assert padded.shape == expected.shape and torch.allclose(padded, expected, atol=1e-5)


def test_a_padded_row_computes_what_its_copy_did():
    """One row padded with a zero row gives the same bits as the row twice (the path before zero rows): a row's
    product does not read the others, so the route changes no solo run's numbers."""
    torch.manual_seed(0)
    weight, x = torch.randn(512, 64), torch.randn(1, 64)
    assert torch.equal(kernels.routed(x, weight, "thin", 2), kernels._thin(torch.cat([x, x]), weight)[:1])


def test_bursts_in_most_rounds_do_not_decide_the_verdict(monkeypatch):
    """Rounds alternate linear and thin; three of the five timed rounds catch thin in a 100x burst (the kind of
    measurement that once kept one-row decoding 1.8x slower than it could be). The fastest round is kept, so thin
    still times at its own speed and wins."""
    own = {"linear": 2.0, "thin": 1.0}
    bursts = {(r, "thin"): 100.0 for r in (1, 2, 3)}
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
    assert kernels.routes({1: times}) == {1: ("thin", 1)}


def test_each_count_takes_the_fastest_path_at_or_above_it():
    """Times shaped like the EPYC's (two rows faster than one, four than three, sixteen than twelve): a count pads
    up only where a larger count is faster by more than PAD_MARGIN, never down, and F.linear stays where thin is not
    clearly (MARGIN) faster."""
    ms = {1: (9.6, 9.7), 2: (17.9, 4.3), 3: (25.4, 5.4), 4: (15.7, 4.9), 5: (15.5, 6.7), 6: (17.4, 6.6),
          12: (16.1, 18.0), 13: (17.6, 23.0), 16: (17.7, 14.3), 17: (20.4, 19.1)}
    plan = kernels.routes({str(r): {"linear": a, "thin": b} for r, (a, b) in ms.items()})  # keys as JSON has them
    assert plan == {1: ("thin", 2), 2: ("thin", 2), 3: ("thin", 4), 4: ("thin", 4), 5: ("thin", 5),
                    6: ("thin", 6), 12: ("thin", 16), 13: ("thin", 16), 16: ("thin", 16), 17: ("linear", 17)}
    # 5 rows (6.7) stay: 6 rows' 6.6 is within PAD_MARGIN of them, a difference noise can make


def test_measured_routing_follows_the_verdict():
    layer = torch.nn.Linear(64, 32, bias=True)
    model = types.SimpleNamespace(device=torch.device("cpu"), modules=lambda: [layer])
    kernels.use_measured_kernels(model, {"routes": {"1": ["thin", 2], "2": ["linear", 2], "3": ["linear", 4]}})
    for rows in (1, 2, 3, 7):
        x = torch.randn(rows, 64)
        assert torch.allclose(layer(x), F.linear(x, layer.weight, layer.bias), atol=1e-5)
    assert layer.forward.args == (layer, {1: ("thin", 2), 2: ("linear", 2), 3: ("linear", 4)})  # the routes it reads


def test_a_verdict_is_timed_once_and_read_back(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(8, 16, bias=False), torch.nn.Linear(16, 8, bias=False))
    model.dtype = torch.float32
    verdict = kernels.choose_kernels(model, tmp_path / "verdicts.json")
    assert set(verdict["routes"]) == set(kernels.ROW_COUNTS)
    assert kernels.choose_kernels(model, tmp_path / "verdicts.json") == verdict
