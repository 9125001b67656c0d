"""Both drafts of the bundled pair side by side: the independent 4-layer draft and the EAGLE-3 head that reads the
target, every method against target-only in one process (alternating, medians), then the seed's Qwen3-1.7B target
with a head of AngelSlim's shapes and with the Qwen3-0.6B draft, random weights (a forward costs what the real
one does): per-call times and c on this CPU.

    python bench/drafts_bench.py [--rounds 2] [--max-new-tokens 48] [--skip-qwen]

Prompts are outside every training set (the head's and the draft's). Writes its section to docs/benchmarks.md.
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from bench.markdown import write_section  # noqa: E402
from bench.speedup_bench import label  # noqa: E402
from cascade_core import generate, load_pair  # noqa: E402
from cascade_core.head import new_head  # noqa: E402
from cascade_core.kernels import cpu_description  # noqa: E402
from cascade_core.prices import calls_seconds, measure_prices, measured_prices  # noqa: E402
from cascade_core.settings import AUTO_GAMMAS  # noqa: E402
from sweeps.quality import target_nll  # noqa: E402

PROMPTS = ["Explain how a bicycle works.", "What is the best way to learn to cook?",
           "Describe a thunderstorm to a child.", "Why do cats purr?"]
TEMPERATURE = 0.7  # the app's default
METHODS = ([("target", 0.0, 1), ("lossless", 0.0, "auto"), ("lossless", 0.0, 3)]
           + [("v3", a, "auto") for a in (0.5, 0.7, 0.9)] + [("chow", 0.5, "auto"), ("opt", 0.2, "auto")])
DRAFTS = ("model", "head")


def per_position_acceptance(traces, depth=5):
    """Mean acceptance probability of the proposals at each step of their block (0: the block's first)."""
    by_step = [[] for _ in range(depth)]
    for trace in traces:
        step, block = 0, None
        for pos in trace.positions:
            step = step + 1 if pos["block"] == block else 0
            block = pos["block"]
            if step < depth and pos.get("accept_prob") is not None:
                by_step[step].append(pos["accept_prob"])
    return [statistics.mean(v) if v else None for v in by_step]


def run_all(pairs, rounds, n, say):
    results = {(d, m): [] for d in pairs for m in METHODS}
    keys = list(results)
    for r in range(rounds):
        for i, prompt in enumerate(PROMPTS):
            shift = (r * len(PROMPTS) + i) % len(keys)
            for draft, (rule, alpha, gamma) in keys[shift:] + keys[:shift]:
                start = time.perf_counter()
                trace = generate(pairs[draft], prompt, rule=rule, alpha=alpha, gamma=gamma, temperature=TEMPERATURE,
                                 seed=r, max_new_tokens=n, stop_at_eos=False)
                results[draft, (rule, alpha, gamma)].append((n / (time.perf_counter() - start), trace))
            say(f"round {r + 1}/{rounds}, prompt {i + 1}/{len(PROMPTS)} done")
    return results


def summarise(results):
    base = statistics.median(s for d in DRAFTS for s, _ in results[d, ("target", 0.0, 1)])
    rows = []
    for (draft, (rule, alpha, gamma)), runs in results.items():
        if rule == "target" and draft == "head":
            continue  # one target-only row: both pairs' targets are the same model
        speeds, traces = [s for s, _ in runs], [t for _, t in runs]
        rows.append(dict(draft="-" if rule == "target" else draft, name=label(rule, alpha, gamma), rule=rule,
                         tok_s=statistics.median(speeds), speedup=statistics.median(speeds) / base,
                         spread=(min(speeds), max(speeds)),
                         acceptance=None if rule == "target" else statistics.median(
                             t.stats["acceptance_rate"] for t in traces),
                         by_step=None if rule == "target" else per_position_acceptance(traces),
                         tokens_per_call=statistics.median(t.stats["tokens_per_target_call"] for t in traces),
                         nll=statistics.median(target_nll([p["p_token"] for p in t.positions]) for t in traces)))
    return dict(rows=rows, base=base)


def qwen_costs(repeats=3):
    """One-token cached calls of random-weight Qwen3-1.7B (target), Qwen3-0.6B (draft) and an EAGLE-3 head of
    AngelSlim/Qwen3-1.7B_eagle3's shapes (32,000-token vocabulary), float32 on this CPU."""
    from transformers import AutoModelForCausalLM, Qwen3Config

    base = dict(vocab_size=151936, max_position_embeddings=40960, rope_theta=1000000, head_dim=128,
                num_key_value_heads=8, rms_norm_eps=1e-6, tie_word_embeddings=True)
    target = AutoModelForCausalLM.from_config(Qwen3Config(**base, hidden_size=2048, intermediate_size=6144,
                                                          num_hidden_layers=28, num_attention_heads=16)).eval()
    draft = AutoModelForCausalLM.from_config(Qwen3Config(**base, hidden_size=1024, intermediate_size=3072,
                                                         num_hidden_layers=28, num_attention_heads=16)).eval()
    head = new_head(target, list(range(32000))).eval()
    vocab = base["vocab_size"]
    seconds = calls_seconds({"target": (target, vocab, 1, None), "draft": (draft, vocab, 1, None),
                             "head": (head, vocab, 1, None), "verify": (target, vocab, 4, None)}, repeats)
    return seconds


def markdown(s, pairs, rounds, n, qwen):
    fmt = lambda v, f="{:.2f}": "-" if v is None else f.format(v)  # noqa: E731
    lines = [f"## Both drafts of the bundled pair: the independent draft and the EAGLE-3 head, {cpu_description()}", "",
             f"`python bench/drafts_bench.py --rounds {rounds} --max-new-tokens {n}`, {time.strftime('%Y-%m-%d')}, "
             f"{torch.get_num_threads()} threads, torch {torch.__version__}; model: {pairs['model'].description}; "
             f"head: {pairs['head'].description}. Temperature {TEMPERATURE}, {n} tokens (EOS ignored), "
             f"{len(PROMPTS)} prompts outside every training set x {rounds} rounds (seed = round), both drafts' "
             "methods alternating in one process; medians. Acceptance by step: the mean acceptance probability of "
             "the proposals at each step of their block (1st, 2nd, ...).", "",
             "| draft | rule, alpha, gamma | tokens/s (min-max) | vs target-only | acceptance | by step | "
             "tokens per target call | target NLL |", "|---|---|---|---|---|---|---|---|"]
    for r in s["rows"]:
        steps = "-" if r["by_step"] is None else " / ".join(fmt(a) for a in r["by_step"][:4])
        lines.append(f"| {r['draft']} | {r['name']} | {r['tok_s']:.1f} ({r['spread'][0]:.1f}-{r['spread'][1]:.1f}) | "
                     f"{r['speedup']:.2f}x | {fmt(r['acceptance'])} | {steps} | {fmt(r['tokens_per_call'])} | "
                     f"{fmt(r['nll'])} |")
    lines.append("")
    for draft in DRAFTS:
        p = measured_prices(pairs[draft], 3)
        lines.append(f"- {draft}: a target token {1000 * p.target:.1f} ms, a draft call {1000 * p.draft:.2f} ms "
                     f"(**c = {p.c:.3f}**), verifying 4 tokens {1000 * p.verify:.0f} ms.")
    if qwen:
        lines += ["", "Seed pair on this CPU, random weights, float32, one-token cached calls after 64 tokens "
                  "(median of 3): Qwen3-1.7B target {:.0f} ms (4-token verification {:.0f} ms); Qwen3-0.6B draft "
                  "{:.0f} ms (c = {:.2f}); EAGLE-3 head of AngelSlim's shapes (one layer, 32,000-token vocabulary) "
                  "{:.1f} ms (c = {:.3f}).".format(1000 * qwen["target"], 1000 * qwen["verify"], 1000 * qwen["draft"],
                                                    qwen["draft"] / qwen["target"], 1000 * qwen["head"],
                                                    qwen["head"] / qwen["target"])]
    lines.append("")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--skip-qwen", action="store_true", help="skip the seed pair's random-weight call times")
    p.add_argument("--out", default="docs/benchmarks.md", help="markdown file to update ('' to skip)")
    args = p.parse_args(argv)
    pairs = {d: load_pair("bundled", draft=d) for d in DRAFTS}
    for pair in pairs.values():
        measure_prices(pair, AUTO_GAMMAS)
    summary = summarise(run_all(pairs, args.rounds, args.max_new_tokens, print))
    qwen = None if args.skip_qwen else qwen_costs()
    text = markdown(summary, pairs, args.rounds, args.max_new_tokens, qwen)
    print(text)
    if args.out:
        write_section(args.out, text, "## Both drafts of the bundled pair")
    return summary


if __name__ == "__main__":
    main()
