"""How fast a sweep runs: 8 prompts x 5 rules x 6 alphas x 48 tokens on one pair, without prefix sharing, with it,
and with it on a local Ray instance (one worker per core); rows per minute for each, written to docs/sweeps.md.

    HF_HUB_OFFLINE=1 python -m bench.sweep_speed [--pair bundled] [--prompts 8] [--alphas auto:6] [--tokens 48]
"""
import time

from bench.harness import PROMPTS, ROOT, bench_arguments, write_section
from cascade_core.speed.kernels import cpu_description
from sweeps import load_prompts, sweep
from sweeps.chain import load_named_pair

RULES = ["chow", "diff", "opt", "v3", "lossy"]


def eight_prompts():
    """The first prompt of each category of the bundled set, then the next ones, to 8."""
    prompts = load_prompts(PROMPTS / "default.jsonl")
    firsts = list({p["category"]: p for p in reversed(prompts)}.values())[::-1]
    return (firsts + [p for p in prompts if p not in firsts])[:8]


def main(argv=None):
    parser = bench_arguments(__doc__)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--prompts", type=int, default=8, help="how many prompts (one per category first)")
    parser.add_argument("--alphas", default="auto:6")
    args = parser.parse_args(argv)
    prompts = eight_prompts()[: args.prompts]
    pair = load_named_pair(args.pair)
    settings = dict(gamma=4, temperature=1.0, max_new_tokens=args.tokens)
    results = {}
    for name, options in (("in-process, no prefix sharing", dict(share_prefix=False, pair=pair)),
                          ("in-process, prefix sharing", dict(pair=pair)),
                          ("Ray, 2 local workers, prefix sharing", dict(ray=True))):
        start = time.perf_counter()
        rows = sweep(args.pair, prompts, RULES, args.alphas, [0], **options, **settings)
        seconds = time.perf_counter() - start
        results[name] = (seconds, len(rows), sum(r["tokens"] for r in rows), sum(r["generated_tokens"] for r in rows))
        print(name, results[name], flush=True)
    lines = [f"## Sweep speed: {args.pair} pair, {len(prompts)} prompts x {len(RULES)} rules x alphas {args.alphas} x "
             f"{args.tokens} tokens", "",
             f"`python -m bench.sweep_speed --pair {args.pair} --prompts {len(prompts)} --alphas {args.alphas} "
             "--tokens "
             f"{args.tokens}`, {time.strftime('%Y-%m-%d')}, {cpu_description()}; "
             f"rules {', '.join(RULES)}, alphas {args.alphas}, gamma 4, T = 1, seed 0; the pilot run that places "
             "the alphas "
             "is included in each time.", "",
             "| how | wall time | rows | rows / minute | tokens in the rows | tokens generated |",
             "|---|---|---|---|---|---|"]
    for name, (seconds, rows, tokens, generated) in results.items():
        lines.append(f"| {name} | {seconds / 60:.1f} min | {rows} | {rows / seconds * 60:.1f} | {tokens} | "
                     f"{generated} |")
    lines += ["", "In-process, one process decodes with torch's threads over every core; on Ray each worker is one "
              "single-threaded process per core with its own copy of the pair, so chains run side by side. Prefix "
              "sharing saves only the tokens before each alpha's first flipped decision, which at T = 1 comes early."]
    text = "\n".join(lines) + "\n"
    print(text)
    write_section(ROOT / "docs" / "sweeps.md", text, "## Sweep speed")


if __name__ == "__main__":
    main()
