"""The Speculative Cascades Explorer's Gradio app: ``build_app`` makes it, ``launch`` serves it."""
from . import gpu  # noqa: F401  first: on a ZeroGPU Space `spaces` is imported before torch
from .layout import build_app, launch

__all__ = ["build_app", "launch"]
