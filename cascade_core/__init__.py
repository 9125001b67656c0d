"""Speculative cascades (Narasimhan et al., ICLR 2025): exact engine, per-token traces, baselines."""
from .engine import generate, stream
from .models import Pair, load_pair
from .rules import ALPHA_RANGE, DESCRIPTIONS, RULES, critical_alpha, target_distribution
from .trace import Trace

__all__ = ["ALPHA_RANGE", "DESCRIPTIONS", "RULES", "Pair", "Trace", "critical_alpha", "generate", "load_pair",
           "stream", "target_distribution"]
