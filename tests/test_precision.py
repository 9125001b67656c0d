"""Weight precision (cascade_core/formats/precision.py): each precision is the model that runs, so the engine's
exactness holds in it (the naive reference loop in the same precision, lossless = the target's greedy, gamma invariance,
batched = solo); fp32 is today's path; "auto" times nothing where nothing is measured and keeps only what its timings
say is faster; what ran is recorded (trace, CLI JSON, the page's line)."""
import json

import pytest
import torch
import torch.nn.functional as F

from cascade_core import RULES, Trace, generate, generate_batch, load_pair
from cascade_core.formats import loading as models, precision
from cascade_core.formats.loading import tiny_pair
from cascade_core.formats.precision import PrecisionLinear, apply_precision, convert, precision_of
from cascade_core.reference import reference_generate
from cascade_core.tools.cli import main as cli_main
from test_exactness import ALPHA
from test_hardening import strict_loads

CONVERTED = ("bf16", "int8", "int8-fp32")
N = 24


@pytest.fixture(scope="module")
def pairs64():
    """The tiny pair in each converted precision over float64 activations: the product rounds what it rounds, and
    everything else agrees between cached and recomputed calls to ~1e-15 (as test_exactness's tiny64)."""
    return {p: load_pair("tiny", dtype=torch.float64, precision=p) for p in CONVERTED}


@pytest.fixture(scope="module")
def prompt_ids():
    return tiny_pair().tokenizer("The cascade", add_special_tokens=False)["input_ids"]


def test_a_bad_precision_is_one_sentence_before_any_model_work(monkeypatch):
    monkeypatch.setattr(models, "_load", lambda *a: pytest.fail("a model was loaded before the precision was checked"))
    for bad in ("fp8", 8, None, "INT8"):
        with pytest.raises(ValueError) as error:
            load_pair("tiny", precision=bad)
        message = str(error.value)
        assert message.startswith(f"precision {bad!r} is not one of auto, fp32, bf16, int8, int8-fp32")
        assert message.count(".") <= 1 and "\n" not in message


def test_fp32_is_todays_path(prompt_ids):
    """fp32 (and "auto" on the tiny pair, where nothing is timed) leaves every Linear as it was: the same modules,
    logits and tokens as the pair built without a precision."""
    today = tiny_pair()
    for asked in ("fp32", "auto"):
        pair = load_pair("tiny", precision=asked)
        assert not any(isinstance(m, PrecisionLinear) for m in pair.target.modules())
        assert precision_of(pair.target) == precision_of(pair.draft) == "fp32"
        ids = torch.tensor([prompt_ids])
        assert torch.equal(pair.target(ids).logits, today.target(ids).logits)
        for rule, temperature in (("v3", 1.0), ("lossless", 0.0), ("chow", 0.7)):
            kwargs = dict(prompt_ids=prompt_ids, rule=rule, alpha=ALPHA[rule], gamma=4, temperature=temperature, seed=3,
                          max_new_tokens=N)
            assert generate(pair, **kwargs).tokens == generate(today, **kwargs).tokens


def test_auto_times_nothing_where_nothing_is_measured(monkeypatch):
    """The tests' pairs load deterministically: the tiny pair, measured_kernels=False and a pair without a verdicts
    file to read are fp32 under "auto", and no call is timed."""
    monkeypatch.setattr(precision, "calls_seconds", lambda *a, **k: pytest.fail("auto timed a call"))
    assert load_pair("tiny").precision_timings is None
    pair = apply_precision(tiny_pair(), "auto", None)
    assert (pair.precision["target"], pair.precision["draft"], pair.precision["asked"]) == ("fp32", "fp32", "auto")


def test_auto_keeps_only_what_is_faster_at_every_call():
    fp32 = {"1": 10.0, "5": 12.0}
    timings = {"fp32": fp32, "bf16": {"1": 9.5, "5": 6.0}, "int8": {"1": 4.0, "5": 11.5},
               "int8-fp32": {"1": 8.0, "5": 10.0}}
    candidates = ("bf16", "int8", "int8-fp32")
    assert precision.pick(timings, candidates) == "int8-fp32"  # bf16 is not under 90% at one token, int8 not at five
    timings["int8"] = {"1": 4.0, "5": 7.0}
    assert precision.pick(timings, candidates) == "int8"  # the least in all, of those faster at every call
    assert precision.pick(timings, ("bf16", "int8-fp32")) == "int8-fp32"  # only candidates are picked
    assert precision.pick({"fp32": fp32, "bf16": {"1": 9.5, "5": 11.0}}, candidates) == "fp32"


def test_auto_is_measured_once_and_converts_to_its_pick(tmp_path, monkeypatch):
    """Per role, the pair's own calls in each candidate (a target's one-token call and five-token verification, a
    draft's one-token call), kept in the verdicts file: a second load reads them back, times nothing."""
    asked = []

    def seconds(calls, repeats, summary):
        asked.append(sorted(calls))
        cost = {"fp32": 1.0, "bf16": 0.8, "int8": 0.5, "int8-fp32": 0.7}
        return {(p, n): cost[p] * n for p, n in calls}

    monkeypatch.setattr(precision, "calls_seconds", seconds)
    monkeypatch.setattr(precision, "AUTO_CANDIDATES", ("bf16", "int8-fp32"))
    pair = apply_precision(tiny_pair(), "auto", tmp_path / "verdicts.json")
    assert precision_of(pair.target) == precision_of(pair.draft) == "int8-fp32"
    assert [sorted({n for _, n in calls}) for calls in asked] == [[1, 5], [1]]
    assert {p for p, _ in asked[0]} == {"fp32", *precision.AUTO_CANDIDATES}
    again = apply_precision(tiny_pair(), "auto", tmp_path / "verdicts.json")
    assert len(asked) == 2 and again.precision_timings == pair.precision_timings
    assert "chosen by timing this CPU" in pair.ran_on


def test_auto_times_the_real_calls(tmp_path, prompt_ids):
    """The measurement itself runs on a pair's models and leaves a precision the engine decodes with."""
    pair = apply_precision(tiny_pair(draft_kind="head"), "auto", tmp_path / "verdicts.json")
    timings = pair.precision_timings
    assert set(timings) == {"target", "draft"} and set(timings["target"]["fp32"]) == {"1", "5"}
    assert all(s > 0 for role in timings.values() for t in role.values() for s in t.values())
    assert len(generate(pair, prompt_ids=prompt_ids, rule="lossless", alpha=0.0, max_new_tokens=8).tokens) == 8


@pytest.mark.parametrize("name", CONVERTED)
@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("rule", RULES)
def test_engine_equals_the_reference_in_the_same_precision_at_every_gamma(pairs64, prompt_ids, name, temperature, rule):
    pair = pairs64[name]
    expected = reference_generate(pair, prompt_ids, rule, ALPHA[rule], temperature, seed=7, max_new_tokens=N)
    for gamma in (1, 2, 4, 8):
        trace = generate(pair, prompt_ids=prompt_ids, rule=rule, alpha=ALPHA[rule], gamma=gamma,
                         temperature=temperature, seed=7, max_new_tokens=N)
        assert trace.tokens == expected, f"gamma={gamma}"


def test_each_precision_is_another_model(pairs64, prompt_ids):
    """Guard against a vacuous comparison: the precisions' texts differ from float64's and from each other's."""
    kwargs = dict(prompt_ids=prompt_ids, rule="target", alpha=0.0, temperature=1.0, seed=7, max_new_tokens=N)
    texts = {tuple(generate(pair, **kwargs).tokens) for pair in pairs64.values()}
    texts.add(tuple(generate(tiny_pair(dtype=torch.float64), **kwargs).tokens))
    assert len(texts) >= 3


@pytest.mark.parametrize("name", CONVERTED)
@pytest.mark.parametrize("draft", ["model", "head"])
def test_greedy_lossless_is_the_targets_own_greedy_in_that_precision(prompt_ids, name, draft):
    """The float32 pair as it loads, in each precision: transformers' greedy decode of the converted target."""
    pair = load_pair("tiny", draft=draft, precision=name)
    ids = torch.tensor([prompt_ids])
    greedy = pair.target.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=N,
                                  min_new_tokens=N, pad_token_id=0)[0, len(prompt_ids):].tolist()
    for gamma in (1, 3, 6):
        trace = generate(pair, prompt_ids=prompt_ids, rule="lossless", alpha=0.0, gamma=gamma, temperature=0,
                         max_new_tokens=N, stop_at_eos=False)
        assert trace.tokens == greedy, f"{name} {draft} gamma={gamma}"


@pytest.mark.parametrize("name", CONVERTED)
def test_batched_rows_are_their_solo_runs(name):
    """On the tiny pair each precision's products compute a row alone (see the next test), so a batch's rows are
    their solo runs; where a CPU's bf16 kernel does not (precision.py, "Batches"), ``reproducible`` is the promise."""
    pair = load_pair("tiny", precision=name)
    rows = [dict(prompt=p, rule=r, alpha=ALPHA[r], seed=s, max_new_tokens=24, temperature=t)
            for p, r, s, t in (("The cat", "v3", 1, 1.0), ("Hello there", "chow", 2, 0.7), ("A", "lossless", 3, 0.0),
                               ("Speculative", "opt", 4, 1.0))]
    batched = generate_batch(pair, rows, gamma=4)
    for row, trace in zip(rows, batched):
        solo = generate(pair, row["prompt"], gamma=4, **{k: v for k, v in row.items() if k != "prompt"})
        assert (trace.tokens, trace.sources) == (solo.tokens, solo.sources), row


@pytest.mark.parametrize("name", ["int8", "int8-fp32"])
def test_the_int8_kernel_computes_each_row_alone(name):
    """precision.py's claim for the int8 kernel, at the bundled target's shapes: any row count gives each row's bits."""
    torch.manual_seed(0)
    for out_features, in_features in ((1536, 576), (576, 1536), (192, 576)):
        layer = PrecisionLinear(torch.nn.Linear(in_features, out_features, bias=False), name)
        x = torch.randn(17, in_features)
        alone = torch.cat([layer(x[i : i + 1]) for i in range(17)])
        assert all(torch.equal(layer(x[:m]), alone[:m]) for m in (2, 5, 17))


@pytest.mark.parametrize("name", CONVERTED)
def test_a_converted_layer_is_its_weights_in_that_precision(name):
    """Per output channel int8: each weight within half a step of its row's scale; bf16: the bf16 product; the
    output in the input's dtype, the bias added after."""
    torch.manual_seed(1)
    linear = torch.nn.Linear(64, 40, bias=True)
    layer = PrecisionLinear(linear, name)
    x = torch.randn(3, 5, 64)
    y = layer(x)
    assert y.dtype == torch.float32 and y.shape == (3, 5, 40)
    if name == "bf16":
        expected = F.linear(x.bfloat16(), linear.weight.bfloat16()).float() + linear.bias
        assert torch.equal(y, expected)
        return
    scales = layer.scales.float()[:, None]
    assert ((layer.stored.float() * scales - linear.weight).abs() <= scales / 2 + 1e-7).all()
    dequantised = (layer.stored.float() * scales).to(precision.PRODUCT_DTYPE[name])
    expected = F.linear(x.to(dequantised.dtype), dequantised).float() + linear.bias
    assert torch.allclose(y, expected, rtol=2e-2, atol=2e-2)


def test_a_layer_the_int8_kernel_cannot_take_falls_back():
    """Input widths that are not a multiple of 8 crash torch's int8 kernel: such a layer stays bf16 (int8) or float32
    (int8-fp32)."""
    model = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.Linear(16, 8))
    convert(model, "int8")
    assert [m.precision for m in model] == ["bf16", "int8"]
    model = convert(torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.Linear(16, 8)), "int8-fp32")
    assert type(model[0]) is torch.nn.Linear and model[1].precision == "int8-fp32"


def test_the_tied_embedding_stays_exact_and_shared_layers_stay_shared():
    pair = tiny_pair()
    embedding = pair.target.get_input_embeddings().weight.clone()
    assert pair.target.lm_head.weight is pair.target.get_input_embeddings().weight  # tied, as SmolLM2's
    shared = pair.target.lm_head
    pair.draft.lm_head = shared  # as the bundled draft shares the target's head
    apply_precision(pair, "int8")
    assert torch.equal(pair.target.get_input_embeddings().weight, embedding)
    assert pair.target.get_input_embeddings().weight.dtype == torch.float32
    assert isinstance(pair.target.lm_head, PrecisionLinear) and pair.draft.lm_head is pair.target.lm_head


def test_the_engine_reads_float32_logits_and_norms_stay_float32(prompt_ids):
    pair = load_pair("tiny", precision="int8")
    assert pair.target(torch.tensor([prompt_ids])).logits.dtype == torch.float32
    assert pair.target.model.norm.weight.dtype == pair.target.dtype == torch.float32


def test_a_converted_model_is_not_converted_again_to_another():
    pair = load_pair("tiny", precision="int8")
    with pytest.raises(ValueError, match="precision 'bf16': this model's Linear layers are already int8"):
        apply_precision(pair, "bf16")


def test_the_trace_and_the_cli_say_which_precision_ran(prompt_ids, capsys):
    pair = load_pair("tiny", draft="head", precision="int8")
    trace = generate(pair, prompt_ids=prompt_ids, rule="v3", alpha=0.3, max_new_tokens=6)
    recorded = strict_loads(trace.to_json())["settings"]["precision"]
    assert recorded == {"target": "int8", "draft": "int8", "asked": "int8", "weights": "random (seed 0), float32"}
    assert Trace.from_json(trace.to_json()).settings["precision"] == recorded
    assert cli_main(["run", "--pair", "tiny", "--precision", "bf16", "--prompt", "Hi", "--max-new-tokens", "4",
                     "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["settings"]["precision"]["target"] == "bf16"
    assert cli_main(["run", "--pair", "tiny", "--precision", "int8", "--prompt", "Hi", "--max-new-tokens", "4"]) == 0
    assert "ran on: tiny random Llama pair (2 layers -> 1 layer) · target and draft model: int8 (int8 weights per " \
           "output channel, bfloat16 products), as asked; weights: random (seed 0), float32" in capsys.readouterr().out


def test_the_cli_refuses_a_bad_precision_in_one_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli_main(["run", "--pair", "tiny", "--precision", "fp8", "--prompt", "Hi"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1 and "--precision" in err and "'fp8'" in err


def test_the_benchmark_runs_end_to_end(tmp_path):
    from bench.precision_bench import main

    out = tmp_path / "bench.md"
    rows, ran = main(["--pair", "tiny", "--rounds", "1", "--max-new-tokens", "3", "--prompts", "1", "--out", str(out)])
    assert ran == {p: p for p in ("fp32", *CONVERTED)}
    text = out.read_text()
    assert "## Weight precision side by side: tiny pair" in text and ("avx" in text or "no AVX2" in text)
    assert rows["fp32"]["tv"] == 0 and all(rows[p]["tv"] > 0 for p in CONVERTED)


def test_the_transformers_entry_runs_the_precision_asked():
    """generate(custom_generate=..., precision="int8") converts both models in place and decodes what the engine
    decodes on the pair loaded in int8; a bad value is refused before any work."""
    from test_custom_generate import CASCADE, engine_seed

    given = tiny_pair()
    inputs = given.tokenizer("Who is Buzz Aldrin?", return_tensors="pt")
    with pytest.raises(ValueError, match="precision 'fp8' is not one of"):
        given.target.generate(assistant_model=given.draft, **CASCADE, **inputs, precision="fp8")
    torch.manual_seed(5)
    out = given.target.generate(assistant_model=given.draft, **CASCADE, **inputs, do_sample=True, alpha=0.25,
                                deferral="v3", max_new_tokens=24, precision="int8")
    assert precision_of(given.target) == precision_of(given.draft) == "int8"
    prompt = inputs["input_ids"][0].tolist()
    trace = generate(load_pair("tiny", precision="int8"), prompt_ids=prompt, rule="v3", alpha=0.25, gamma=4,
                     seed=engine_seed(5), max_new_tokens=24)
    assert out[0].tolist() == prompt + trace.tokens
