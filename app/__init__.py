"""The Speculative Cascades Explorer's Gradio app: ``build_app`` makes it, ``launch`` serves it."""
from .layout import build_app, launch

__all__ = ["build_app", "launch"]
