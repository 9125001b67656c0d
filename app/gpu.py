"""``@gpu``: Hugging Face's ``spaces.GPU`` on a ZeroGPU Space (requests a GPU per call), a no-op elsewhere."""
try:
    import spaces
except ImportError:
    spaces = None


def gpu(fn):
    return spaces.GPU(fn) if spaces is not None else fn
