"""The shipped draft's report for docs/benchmarks.md: learning curve, held-out agreement, the engine's measured
acceptance, cost ratio c, measured vs cost-model speed-ups, and the draft's own greedy answers."""
import csv
import json
import time
from pathlib import Path

from bench.harness import acceptance_by_step, forward_ms, write_section
from cascade_core import generate, load_pair
from cascade_core.formats.shipped_draft import DRAFT_FILE, draft_meta
from cascade_core.method.costs import expected_speedup

from . import data


def continued_text(earlier):
    """How the draft a run started from was made (chains of --init-from runs, newest first)."""
    if not earlier:
        return ""
    return (f" It continued a draft trained on {earlier.get('device', 'cpu')} with `{earlier.get('options', '')}` "
            f"({earlier['tokens']} positions, {earlier['step']} steps, held-out 1 - TV "
            f"{earlier['held_out']['acceptance']:.3f}).") + continued_text(earlier.get("continued_from"))


def report(work, out, gamma_max=4, n_tokens=48, say=print):
    """Markdown for docs/benchmarks.md: learning curve, held-out agreement, the engine's measured acceptance,
    the draft's own greedy answers, its cost ratio c and measured vs cost-model speed-ups."""
    pair = load_pair("bundled")
    meta = draft_meta(out)
    curve = list(csv.DictReader(open(Path(work) / "curve.csv")))
    stride = max(1, len(curve) // 12)
    runs = {p: generate(pair, p, rule="lossless", alpha=0.0, gamma=gamma_max, temperature=1.0, seed=1,
                        max_new_tokens=n_tokens) for p in data.EVAL_PROMPTS}
    acceptance = sum(t.stats["acceptance_rate"] for t in runs.values()) / len(runs)
    c = forward_ms(pair.draft, pair.vocab_size) / forward_ms(pair.target, pair.vocab_size)
    speed = {}
    for gamma in [None] + list(range(1, gamma_max + 1)):
        rule = "target" if gamma is None else "lossless"
        traces = [generate(pair, p, rule=rule, alpha=0.0, gamma=gamma or 1, temperature=1.0, seed=2,
                           max_new_tokens=n_tokens, stop_at_eos=False) for p in data.EVAL_PROMPTS[:3]]
        speed[gamma] = (sum(len(t.tokens) for t in traces) / sum(t.stats["wall_seconds"] for t in traces),
                        sum(t.stats["acceptance_rate"] or 0 for t in traces) / len(traces))
        say(f"speed at gamma {gamma}: {speed[gamma][0]:.1f} tokens/s")
    answers = {p: generate(pair, p, rule="draft", temperature=0, max_new_tokens=40).text
               for p in data.EVAL_PROMPTS}
    ho = meta["held_out"]
    lines = [
        f"## Bundled draft: {pair.description}", "",
        f"`python -m distill --out {out} {meta.get('options', '')}` on {meta.get('device', 'cpu')} "
        f"(report: `--report-only`), {time.strftime('%Y-%m-%d')}. "
        f"Student initialised from target layers {meta['init_layers']}; embeddings, final norm and tied head shared "
        f"with the target and frozen; shipped file: its own layers in float16 "
        f"({(Path(out) / DRAFT_FILE).stat().st_size / 2**20:.1f} MiB). Best checkpoint: step {meta['step']}, "
        f"{meta['tokens']} training positions." + continued_text(meta.get("continued_from")), "",
        "Held-out prompts (never used in training): " + "; ".join(data.EVAL_PROMPTS) + ".", "",
        f"- Held-out agreement on the target's own sampled answers: 1 - TV = **{ho['acceptance']:.3f}** "
        f"(expected lossless acceptance), top-1 agreement {ho['top1']:.3f}, KL(p || q) {ho['kl']:.3f}.",
        f"- Measured lossless acceptance with the engine (T = 1, gamma = {gamma_max}, {n_tokens} tokens per prompt): "
        f"**{acceptance:.3f}**.",
        f"- Cost ratio c = draft / target cached forward = **{c:.2f}**.", "",
        "| gamma | tokens/s | measured speed-up vs target-only | cost-model estimate (g + 1 draft calls) "
        "| acceptance |",
        "|---|---|---|---|---|",
        f"| target only | {speed[None][0]:.1f} | 1.00x | - | - |",
    ]
    for gamma in range(1, gamma_max + 1):
        tok_s, acc = speed[gamma]
        lines.append(f"| {gamma} | {tok_s:.1f} | {tok_s / speed[None][0]:.2f}x | "
                     f"{expected_speedup(acc, gamma, c, gamma + 1):.2f}x | {acc:.3f} |")
    lines += ["", "Learning curve (held-out every few rounds):", "",
              "| round | step | training positions | minutes | train loss | held-out KL | top-1 | 1 - TV |",
              "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['round']} | {r['step']} | {r['tokens']} | {r['minutes']} | {r['train_loss']} | {r['eval_kl']} | "
              f"{r['eval_top1']} | {r['eval_acceptance']} |"
              for r in curve[::stride] + ([curve[-1]] if (len(curve) - 1) % stride else [])]
    lines += ["", "The draft's own greedy answers to every held-out prompt (draft only, temperature 0, 40 tokens):", ""]
    lines += [f"- *{p}* {a!r}" for p, a in answers.items()]
    text = "\n".join(lines) + "\n"
    write_section("docs/benchmarks.md", text, "## Bundled draft:")
    return text


def continued_head_text(earlier):
    """How the head a run trained on from was made (``--init-from``: a chain, newest first)."""
    if not earlier:
        return ""
    scores = " / ".join(f"{v:.3f}" for v in earlier["held_out_acceptance_by_step"]["0.7"])
    return (f" It trained on from {earlier['source']}, made with `{earlier['options']}` (step {earlier['step']}, "
            f"{earlier['answers']} answers; held-out 1 - TV by step at T 0.7 on its own held-out set {scores})."
            + continued_head_text(earlier.get("continued_from")))


def head_report(work, gamma=3, n_tokens=48, temperature=0.7, say=print):
    """Markdown for docs/benchmarks.md on the bundled head (assets/head-smollm2): how it was trained (``work``: its
    training folder), the draft vocabulary's coverage and ceiling, held-out 1 - TV by drafting step, the engine's
    acceptance by block step on the held-out prompts, and the learning curve."""
    from cascade_core.formats.loading import BUNDLED_HEAD
    from cascade_core.speed.kernels import cpu_description

    pair = load_pair("bundled", draft="head")
    meta, out = pair.draft.meta, BUNDLED_HEAD.relative_to(Path(__file__).resolve().parents[1])
    curve = json.loads((Path(work) / "curve.json").read_text())
    stride = max(1, len(curve) // 12)
    traces = [generate(pair, p, rule="lossless", gamma=gamma, temperature=temperature, seed=1, max_new_tokens=n_tokens,
                       stop_at_eos=False) for p in data.EVAL_PROMPTS]
    say("engine runs on the held-out prompts done")
    by_step = acceptance_by_step(traces, gamma + 1)
    measured = sum(t.stats["acceptance_rate"] for t in traces) / len(traces)
    fmt = lambda values: " / ".join(f"{v:.3f}" for v in values if v is not None)  # noqa: E731
    scores = meta["held_out_acceptance_by_step"]
    lines = [
        f"## Bundled head: {pair.description}", "",
        f"`python -m distill --head --out {out} --work {work} {meta['options']}` on {cpu_description()} "
        f"(report: `--head --report-only`), {time.strftime('%Y-%m-%d')}. Shipped: the best held-out checkpoint, step "
        f"{meta['step']} after {meta['minutes']} training minutes; {meta['answers']} of the target's answers "
        f"({meta['answer_tokens']} answer tokens) to composed instructions; its own weights in float16 "
        f"({(BUNDLED_HEAD / 'model.safetensors').stat().st_size / 2**20:.1f} MiB), the embedding is the target's."
        + continued_head_text(meta.get("continued_from")), "",
        "Held-out prompts (never trained on): " + "; ".join(data.EVAL_PROMPTS) + ".", "",
        "- Share of the target's expected counts over its training answers held by the n most frequent tokens: "
        + ", ".join(f"{n}: {v:.3f}" for n, v in meta["coverage"].items()) + ".",
        "- The ceiling of 1 - TV for a head over those n tokens (the target's held-out mass inside them), at T 1: "
        + ", ".join(f"{n}: {v:.3f}" for n, v in meta["ceiling"]["1.0"].items()) + "; at T 0.7: "
        + ", ".join(f"{n}: {v:.3f}" for n, v in meta["ceiling"]["0.7"].items()) + ".",
        f"- Held-out 1 - TV by drafting step (1st, 2nd, 3rd proposal of a block; the expected lossless acceptance): "
        f"at T 1 **{fmt(scores['1.0'])}**, at T 0.7 **{fmt(scores['0.7'])}**.",
        f"- The engine on the held-out prompts (lossless, T {temperature}, gamma {gamma}, {n_tokens} tokens, seed 1): "
        f"acceptance **{measured:.3f}**; mean acceptance probability by block step {fmt(by_step)}.", "",
        "Learning curve (held-out 1 - TV by drafting step):", "",
        "| step | minutes | train loss | at T 1 | at T 0.7 |", "|---|---|---|---|---|"]
    lines += [f"| {step} | {minutes} | {loss} | {fmt(s['1.0'])} | {fmt(s['0.7'])} |"
              for step, minutes, loss, s in curve[::stride] + ([curve[-1]] if (len(curve) - 1) % stride else [])]
    text = "\n".join(lines) + "\n"
    write_section("docs/benchmarks.md", text, "## Bundled head:")
    return text
