"""Sweeps: the quality/cost frontier of every rule over a prompt set, in-process or on Ray (``python -m sweeps``)."""
from .prompts import load_prompts
from .sweep import sweep

__all__ = ["load_prompts", "sweep"]
