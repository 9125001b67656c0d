"""``@gpu(tokens, head)``: Hugging Face's ``spaces.GPU`` on a ZeroGPU Space, a no-op elsewhere.

On ZeroGPU only a decorated function gets a GPU, in a forked process, and a visitor's daily quota is charged for
the duration it asks for, not the time it uses (anonymous visitors 2 minutes a day, signed-in ones 5): so each
call asks for what its tokens need, from its own arguments, instead of the default 60 s. ``spaces`` must be
imported before torch initialises CUDA: app/__init__.py imports this module first.
"""
import inspect

try:
    import spaces
except ImportError:
    spaces = None

# Eager decoding on a ZeroGPU H200 slice is launch-bound, about 20 ms per forward whatever the model's size (the
# bundled target: 19.1 ms per token); a block of gamma 4 makes 5 draft forwards and one target forward and emits
# 1 to 5 tokens. SECONDS_PER_TOKEN covers a block that keeps two of them; START the fork, moving the pair to the
# GPU and the prefill.
SECONDS_PER_TOKEN = 0.06
# With an EAGLE-3 head a draft call is one decoder layer, about 1/28 of the target's forward: a block is then about
# one target forward (20 ms) for its two kept tokens; twice that, for margin.
SECONDS_PER_TOKEN_HEAD = 0.02
START_SECONDS = 10
DEFAULT_SECONDS = 60  # where the arguments say nothing (bad input: the function refuses it at once)


def gpu_seconds(tokens, head=False):
    """The GPU time a call that may generate ``tokens`` tokens asks for (``head``: its draft is an EAGLE-3 head)."""
    return round(START_SECONDS + (SECONDS_PER_TOKEN_HEAD if head else SECONDS_PER_TOKEN) * tokens)


def gpu(tokens, head=lambda arguments: False):
    """Decorate a function that runs the models; ``tokens(arguments)`` (its arguments by name) is how many tokens
    the call may generate, ``head(arguments)`` whether its draft is an EAGLE-3 head."""
    def decorate(fn):
        if spaces is None:
            return fn
        signature = inspect.signature(fn)

        def duration(*args, **kwargs):
            try:
                arguments = signature.bind(*args, **kwargs).arguments
                return gpu_seconds(tokens(arguments), head(arguments))
            except (ValueError, TypeError, KeyError, AttributeError, OverflowError):
                return DEFAULT_SECONDS

        return spaces.GPU(fn, duration=duration)
    return decorate
