"""Launch the Speculative Cascades Explorer: ``python app.py [--pair tiny|bundled] [--target ID --draft ID]
[--compile] [--precision auto|fp32|bf16|int8|int8-fp32]``."""
import argparse
import os
import sys
from functools import partial

from app import build_app, launch
from app.fair_share import loopback
from app.layout import default_pair_spec, on_space
from app.pairs import PairCache
from cascade_core.decoding.batch_block import measure_auto_prices
from cascade_core.decoding.run_settings import AUTO_GAMMAS
from cascade_core.formats.loading import load_pair, pair_spec
from cascade_core.formats.precision import AUTO, PRECISIONS
from cascade_core.speed.prices import missing_prices


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pair", choices=["tiny", "bundled"], help="offline pair (default: bundled; "
                        "on a Hugging Face Space: Qwen/Qwen3-0.6B -> Qwen/Qwen3-1.7B)")
    parser.add_argument("--target", help="target model: hub id or local folder (with --draft)")
    parser.add_argument("--draft", help="draft model: hub id or local folder (with --target)")
    parser.add_argument("--compile", action="store_true",
                        help="decode on the compiled static-cache path: faster per token after a first compile "
                             "(about a minute and a half per shape on a CPU)")
    parser.add_argument("--precision", default=AUTO, choices=(AUTO, *PRECISIONS),
                        help="the models' Linear layers on the CPU: auto (default: the faster, timed here, of fp32 "
                             "and the precisions within MAX_TV of it), fp32 (as loaded), bf16, int8 or int8-fp32 "
                             "(cascade_core/formats/precision.py)")
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                        help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", 7860)))
    parser.add_argument("--share", action="store_true", help="also serve through a public gradio.live link")
    parser.add_argument("--public", action="store_true",
                        help="only allow-listed model ids (on by itself on a Space, with --share or a non-loopback "
                             "--host)")
    parser.add_argument("--trust-visitors", action="store_true",
                        help="with --share or a non-loopback --host, let visitors load any hub id or local folder "
                             "(public mode stays off)")
    args = parser.parse_args(argv)
    if bool(args.target) != bool(args.draft):
        parser.error("--target and --draft go together")
    if args.pair and args.target:
        parser.error("give either --pair or --target/--draft")
    return args


def reachable_from_elsewhere(args):
    """On a Space, through a gradio.live link, or bound to an address other machines can reach."""
    if on_space() or args.share:
        return True
    return not loopback(args.host)


def public_mode(args):
    """Public mode (allow-listed models only) whenever others can reach the app, unless --trust-visitors."""
    return args.public or (reachable_from_elsewhere(args) and not args.trust_visitors)


def main(argv=None):
    args = parse_args(argv)
    spec = pair_spec(args.draft, args.target) if args.target else args.pair or default_pair_spec()
    public = public_mode(args)
    if public and not args.public:
        print("public mode: others can reach this app, so it loads only allow-listed models "
              "(--trust-visitors turns this off)", file=sys.stderr)
    pairs = PairCache(public=public, loader=partial(load_pair, compiled=args.compile,
                                                               precision=args.precision))
    # Load the pair and measure gamma "auto"'s prices before serving, so that the first Run streams at once and no
    # call waits for the measurement (on a Space a GPU call measures them, on the GPU; the compiled path takes a fixed
    # gamma). Failures are shown again in the page.
    try:
        pair = pairs.get(spec)
        if not on_space() and missing_prices(pair, AUTO_GAMMAS):
            measure_auto_prices(pair)
    except ValueError as error:
        print(f"warning: {error}", file=sys.stderr)
    launch(build_app(spec, public=public, pairs=pairs), host=args.host, port=args.port, share=args.share)


if __name__ == "__main__":
    main()
