"""Command line: ``python -m cascade_core run ...``."""
import argparse
import sys
from pathlib import Path

from cascade_core.decoding.generation import generate
from cascade_core.formats.loading import load_pair
from cascade_core.formats.precision import AUTO, PRECISIONS
from cascade_core.method.rules import RULES
from cascade_core.tools.hub_export import DEFAULT_REPO_ID, export

# Okabe-Ito colours (colour-blind safe) as 256-colour ANSI codes: blue, orange, vermillion.
ANSI = {"accepted": "\033[38;5;32m", "deferred": "\033[38;5;214m", "replaced": "\033[1;38;5;202m",
        "target": "\033[38;5;175m"}  # the target's own token (gamma auto's floor): reddish purple
RESET = "\033[0m"


def add_pair_arguments(parser):
    parser.add_argument("--pair", default="bundled", help="tiny | bundled (ignored with --target)")
    parser.add_argument("--target", help="target model: hub id or local folder")
    parser.add_argument("--draft", help="model | head (the pair's independent draft or its EAGLE-3 head), or with "
                                        "--target a draft model's or an EAGLE-3 head's hub id or local folder")
    parser.add_argument("--precision", default=AUTO, choices=(AUTO, *PRECISIONS),
                        help="the Linear layers' weights: auto (timed on this machine, default), fp32 (as loaded), "
                             "bf16, int8 (per output channel, bf16 products) or int8-fp32 (float32 products)")


def pair_from_args(args):
    if args.target:
        return load_pair(target=args.target, draft=args.draft, compiled=args.compile, precision=args.precision)
    return load_pair(args.pair, draft=args.draft, compiled=args.compile, precision=args.precision)


def coloured(trace, colour=True):
    if not colour:
        return trace.text
    return "".join(f"{ANSI[pos['source']]}{pos['text']}{RESET}" for pos in trace.positions)


def format_stats(stats):
    def fmt(v):
        return f"{v:.3f}" if isinstance(v, float) else str(v)

    return "  ".join(f"{k}={fmt(v)}" for k, v in stats.items())


def hub_export(args):
    written = [str(path.relative_to(args.directory)) for path in export(args.directory, args.repo_id)]
    print(f"wrote {len(written)} files to {args.directory}: {', '.join(written)}")
    print(f"push it as it is (hf upload {args.repo_id} {args.directory} .), then call "
          f"generate(..., custom_generate={args.repo_id!r}, trust_remote_code=True)")


def run(args):
    pair = pair_from_args(args)
    trace = generate(pair, args.prompt, rule=args.rule, alpha=args.alpha, gamma=args.gamma,
                     temperature=args.temperature, seed=args.seed, max_new_tokens=args.max_new_tokens,
                     chat=not args.raw)
    if args.json:
        print(trace.to_json())
        return
    colour = sys.stdout.isatty() or args.color
    legend = "  ".join(f"{ANSI[s]}{s}{RESET}" if colour else s for s in ANSI)
    print(coloured(trace, colour))
    print(f"\n[{legend}]")
    print(format_stats(trace.stats))
    print(f"ran on: {pair.ran_on}")


class OneLineErrors(argparse.ArgumentParser):
    """Every mistake on the command line is one ``error:`` line and exit status 2, as the engine's are."""

    def error(self, message):
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)


def attach_values(argv, options):
    """'--alpha -0.5' as '--alpha=-0.5': argparse would take a value that starts with '-' for an option."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] in options and i + 1 < len(argv) and argv[i + 1].startswith("-"):
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def number(text):
    """A float for argparse; the engine says which numbers a setting allows."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def integer(text):
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def gamma_argument(text):
    """--gamma: a whole number, or "auto" (the cost model picks each block's length)."""
    return text if text == "auto" else integer(text)


def main(argv=None):
    parser = OneLineErrors(prog="python -m cascade_core", description="Speculative cascades")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineErrors)

    p_run = sub.add_parser("run", help="generate once and show every token's provenance")
    add_pair_arguments(p_run)
    p_run.add_argument("--compile", action="store_true",
                       help="the compiled static-cache decode path: faster per token, compiles first "
                            "(minutes on a CPU)")
    p_run.add_argument("--prompt", required=True)
    p_run.add_argument("--rule", default="v3", help=f"one of: {', '.join(RULES)}")
    p_run.add_argument("--alpha", type=number, default=0.3)
    p_run.add_argument("--gamma", type=gamma_argument, default=4, help='draft block length, or "auto"')
    p_run.add_argument("--temperature", type=number, default=1.0)
    p_run.add_argument("--seed", type=integer, default=0)
    p_run.add_argument("--max-new-tokens", type=integer, default=64)
    p_run.add_argument("--raw", action="store_true", help="do not apply the chat template")
    p_run.add_argument("--json", action="store_true", help="print the trace as JSON")
    p_run.add_argument("--color", action="store_true", help="colour even when stdout is not a terminal")
    p_run.set_defaults(func=run)

    p_export = sub.add_parser("hub-export", help="write the transformers entry as a folder to push to the Hub")
    p_export.add_argument("directory", type=Path, help="the folder to write (a new one, or a clone of the Hub repo)")
    p_export.add_argument("--repo-id", default=DEFAULT_REPO_ID, help="the Hub repository the model card's usage names")
    p_export.set_defaults(func=hub_export)

    valued = {a for action in p_run._actions for a in action.option_strings if action.nargs is None and action.type}
    args = parser.parse_args(attach_values(sys.argv[1:] if argv is None else argv, valued | {"--prompt", "--rule"}))
    try:
        args.func(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
