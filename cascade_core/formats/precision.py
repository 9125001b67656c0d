"""Weight precision: how a loaded model's Linear layers store their weights and multiply, named or measured.

Decoding a few rows on a CPU streams every weight from memory once per call, so a product's time follows its
weights' bytes, and bfloat16 or int8 weights can make the target's call cheaper than float32's (the figures:
docs/benchmarks.md). A precision changes the Linear layers' products only: each product's input is rounded to the
product's dtype and its output handed back in the model's dtype (float32 on the CPU), so norms, attention,
softmax, the rules, sampling and verification read float32 numbers as before (float64 where they did). The logits
the engine reads are float32: pi, the keep test and the trace read the full-precision numbers of the model that
ran. Embedding lookups stay exact: a target whose LM head is tied to its embedding gets a converted copy for the
head, the embedding keeps its own weights.

``PRECISIONS``:

- ``fp32``: the Linear layers as loaded (float32 on the CPU): today's path, kernels.py's measured routes included.
- ``bf16``: bfloat16 weights; input and output of each product in bfloat16.
- ``int8``: int8 weights per output channel (symmetric, a bfloat16 scale per row, rounded before the weights are,
  so that each weight is the nearest multiple of the scale as stored), bfloat16 input and output, through torch's
  ``_weight_int8pack_mm``. That kernel takes input widths that are multiples of 8 only (others crash it): such a
  layer stays in bf16.
- ``int8-fp32``: the same int8 weights with float32 input and output (no bfloat16 rounding; for a CPU without
  native bfloat16, where bfloat16 input may be slow). A layer whose width the kernel does not take stays float32.

**The target is what it runs.** A target in bf16 or int8 is another model than its float32 self: lossless
reproduces the target in the precision that ran, and how far each precision moves the model (the mean next-token
TV to float32 on held-out prompts) is measured, not assumed (bench/precision_bench.py).

**Batches.** On the CPUs measured here the int8 kernel computes each row alone (the same bits at any row count) and
bfloat16's F.linear mostly does too, but not everywhere (the bundled target's down projection, 1,536 inputs, at 17
rows). Since a bf16 product's output is rounded to bfloat16, a difference in the last float32 bit of its sum (or of
an attention output before the next product rounds its input) can become a bfloat16 step, 2^-8 relative: larger
than float32's ~1e-7, so a row decoding beside others, or a verification of n tokens against one-token decoding,
can part from its solo run at a decision farther from its threshold than sampling.NEAR_TIE marks. ``reproducible``
(run_settings.py) decodes a call's rows in a batch of their own: a one-row call is then bitwise its solo run.

**"auto"** (``choose``) times the model's own cached calls, as the engine makes them (prices.py's calls: one token
for the target and the draft, a gamma-4 verification for the target), in float32 (its measured routes) and in each
of ``AUTO_CANDIDATES`` (the precisions that move the model by at most MAX_TV), alternating, fastest of 5; it keeps a
candidate only where every call takes under MARGIN of float32's, and of those the one whose calls take least in all.
The timings are kept with kernels.py's verdicts (CPU, its flags, torch version, model class, dtype, layer shapes):
measured once per machine and model. Where nothing is measured (the tiny pair, ``measured_kernels=False``, the
compiled path, a GPU), "auto" is "fp32" and no time is taken: the tests load pairs that way, deterministically, and
pass the precision they test explicitly.
"""
import copy
import itertools

import torch
import torch.nn.functional as F

from cascade_core.messages import shown
from cascade_core.speed.kernels import cpu_description, measured_once
from cascade_core.speed.prices import calls_seconds

AUTO = "auto"
PRECISIONS = ("fp32", "bf16", "int8", "int8-fp32")
# What "auto" may choose besides fp32: a precision that moves the bundled target's next-token distribution by more
# than MAX_TV on the held-out prompts is left out, however fast (bench/precision_bench.py measures both). Per output
# channel int8 does, with bfloat16 or float32 products alike (its weights' rounding, not the LM head's, moves it):
# asked for by name, it runs; "auto" does not pick it.
AUTO_CANDIDATES = ("bf16",)
MAX_TV = 0.02
MARGIN = 0.9  # a candidate's every call under 90% of float32's: a few % is noise
CALLS = {"target": (1, 5), "draft": (1,)}  # tokens per timed call, by role
# The product's dtype, and what a layer the int8 kernel cannot take (input width not a multiple of 8) falls back to.
PRODUCT_DTYPE = {"bf16": torch.bfloat16, "int8": torch.bfloat16, "int8-fp32": torch.float32}
FALLBACK = {"int8": "bf16", "int8-fp32": "fp32"}
SAID = {"fp32": "float32 weights and products", "bf16": "bfloat16 weights and products",
        "int8": "int8 weights per output channel, bfloat16 products",
        "int8-fp32": "int8 weights per output channel, float32 products"}
WHOLE_MODEL = {torch.float64: "fp64", torch.bfloat16: "bf16 (whole model)", torch.float16: "fp16 (whole model)"}


def check_precision(value):
    """A precision name, or a ValueError in one sentence naming the field, the value and what is allowed."""
    if not isinstance(value, str) or value not in (AUTO, *PRECISIONS):
        raise ValueError(f"precision {shown(value)} is not one of {', '.join((AUTO, *PRECISIONS))} (the Linear "
                         "layers' weights; auto: timed on this machine)")
    return value


def int8_rows(weight, dtype):
    """(int8 weights, scales in ``dtype``) per output channel: scale = max |w| / 127 per row, rounded to ``dtype``
    first; a row of zeros gets scale 1."""
    scales = (weight.abs().amax(1).float() / 127).to(dtype)
    scales = torch.where(scales > 0, scales, torch.ones_like(scales))
    return (weight.float() / scales.float()[:, None]).round_().clamp_(-127, 127).to(torch.int8), scales


class PrecisionLinear(torch.nn.Module):
    """y = x W^T + b with W stored in ``precision``: x rounded to the product's dtype, y handed back in x's."""

    def __init__(self, linear, precision):
        super().__init__()
        self.in_features, self.out_features, self.precision = linear.in_features, linear.out_features, precision
        weight, dtype = linear.weight.detach(), PRODUCT_DTYPE[precision]
        if precision == "bf16":
            self.register_buffer("stored", weight.to(dtype).contiguous())
            self.scales = None
        else:
            stored, scales = int8_rows(weight, dtype)
            self.register_buffer("stored", stored.contiguous())
            self.register_buffer("scales", scales)
        self.bias = linear.bias  # the model's dtype, added after the product

    def forward(self, x):
        flat = x.reshape(-1, self.in_features).to(PRODUCT_DTYPE[self.precision]).contiguous()
        if self.precision == "bf16":
            y = F.linear(flat, self.stored)
        else:
            y = torch.ops.aten._weight_int8pack_mm(flat, self.stored, self.scales)
        y = y.reshape(*x.shape[:-1], self.out_features).to(x.dtype)
        return y if self.bias is None else y + self.bias

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, precision={self.precision}"


def layer_precision(linear, precision):
    """The precision a Linear layer takes under the model's: the int8 kernel's fallback where it cannot take it."""
    if precision in FALLBACK and linear.in_features % 8:
        return layer_precision(linear, FALLBACK[precision])
    return precision


def convert(model, precision, converted=None):
    """Every Linear of ``model`` replaced in place by its ``precision`` form (fp32: left as it is); ``converted``:
    {id(linear): (linear, its form)} across a pair's models, so that a layer two models share stays shared.
    Returns the model, which records its precision (``precision_of``)."""
    done = getattr(model, "linear_precision", None)
    if done not in (None, precision):
        raise ValueError(f"precision {precision!r}: this model's Linear layers are already {done}; load it again to "
                         "run it in another precision")
    if precision == "fp32":
        return model
    converted = {} if converted is None else converted
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, torch.nn.Linear) and layer_precision(child, precision) != "fp32":
                if id(child) not in converted:
                    converted[id(child)] = (child, PrecisionLinear(child, layer_precision(child, precision)))
                setattr(parent, name, converted[id(child)][1])
    model.linear_precision = precision
    return model


def precision_of(model):
    """The precision a model runs in: the one it was converted to, else its dtype's (fp32 on the CPU)."""
    converted = getattr(model, "linear_precision", None)
    if converted is not None:
        return converted
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)
    return WHOLE_MODEL.get(dtype, "fp32")


def loaded_as(model):
    """The precision to load another copy in so that it runs as ``model`` does: its conversion, or fp32 (as loaded)."""
    return getattr(model, "linear_precision", None) or "fp32"


def twin(model):
    """A copy of the model's modules that shares its tensors (no weight copied), to convert for a timing."""
    shared = {id(t): t for t in itertools.chain(model.parameters(), model.buffers())}
    return copy.deepcopy(model, shared)


def layer_shapes(model):
    """[shape, count] of the model's Linear weights: what a timing's verdict is kept for."""
    shapes = sorted(tuple(m.weight.shape) for m in model.modules() if isinstance(m, torch.nn.Linear))
    return [[list(shape), len(list(group))] for shape, group in itertools.groupby(shapes)]


def time_precisions(model, vocab, calls):
    """{precision: {tokens: seconds}}: the model's cached calls of each token count in fp32 and each candidate,
    alternating, the fastest of 5 (a burst of another job's load only adds time, and a verdict is kept for good)."""
    models = {"fp32": model, **{p: convert(twin(model), p) for p in AUTO_CANDIDATES}}
    seconds = calls_seconds({(p, n): (m, vocab, n, None) for p, m in models.items() for n in calls}, repeats=5,
                            summary=min)
    return {p: {str(n): seconds[p, n] for n in calls} for p in models}


def pick(timings, candidates):
    """The candidate whose every call is under MARGIN of fp32's and whose calls take least in all, else fp32."""
    fp32 = timings["fp32"]
    faster = {p: sum(t.values()) for p, t in timings.items()
              if p in candidates and all(t[n] < MARGIN * fp32[n] for n in fp32)}
    return min(faster, key=faster.get) if faster else "fp32"


def choose(model, vocab, calls, verdicts_path):
    """(the precision "auto" keeps for ``model``, the timings it read): measured once per machine and model."""
    key = [cpu_description(), torch.__version__, "cached calls per precision; fastest of 5", type(model).__name__,
           str(model.dtype), layer_shapes(model), list(calls), list(AUTO_CANDIDATES)]
    timings = measured_once(verdicts_path, key, lambda: {"timings": time_precisions(model, vocab, calls)})["timings"]
    return pick(timings, AUTO_CANDIDATES), timings


def auto_choice(pair, verdicts_path):
    """{role: precision} "auto" keeps for the pair's target and draft (their timings in ``pair.precision_timings``);
    fp32 for both without ``verdicts_path`` (nothing measured)."""
    if verdicts_path is None:
        return {"target": "fp32", "draft": "fp32"}
    verdicts = {role: choose(model, pair.vocab_size, CALLS[role], verdicts_path)
                for role, model in (("target", pair.target), ("draft", pair.draft))}
    pair.precision_timings = {role: timings for role, (_, timings) in verdicts.items()}
    return {role: chosen for role, (chosen, _) in verdicts.items()}


def apply_precision(pair, precision, verdicts_path=None):
    """The pair's target and draft in ``precision`` (checked), converted in place ("auto": ``auto_choice``).
    Returns the pair."""
    precision = check_precision(precision)
    if precision not in (AUTO, "fp32") and pair.target.device.type != "cpu":
        raise ValueError(f"precision {precision!r} converts the Linear layers for the CPU; on "
                         f"{pair.target.device.type} the models run in their loaded dtype: use 'auto' or 'fp32'")
    chosen = auto_choice(pair, verdicts_path) if precision == AUTO else {"target": precision, "draft": precision}
    converted = {}
    pair.target = convert(pair.target, chosen["target"], converted)
    pair.draft = convert(pair.draft, chosen["draft"], converted)
    pair.asked_precision = precision
    pair.prices.clear()  # its calls cost what the precision's calls cost
    pair.overhead = None
    return pair


def _named(precision):
    return f"{precision} ({SAID[precision]})" if precision in SAID else precision  # a whole model's dtype


def _chosen(pair):
    """How the precision was chosen, in words ('' for models handed over as they were)."""
    if pair.asked_precision is None:
        return ""
    if pair.asked_precision != AUTO:
        return ", as asked"
    return ", chosen by timing this CPU" if pair.precision_timings else ", auto with nothing timed (as loaded)"


def said(pair):
    """The precision that ran, in words: each model's, how it was chosen, and where the weights came from."""
    target, draft = (precision_of(m) for m in (pair.target, pair.draft))
    label = pair.drafting.label
    models = (f"target and {label}: {_named(target)}" if target == draft
              else f"target: {_named(target)}, {label}: {_named(draft)}")
    return "; ".join([models + _chosen(pair)] + ([f"weights: {pair.weights}"] if pair.weights else []))
