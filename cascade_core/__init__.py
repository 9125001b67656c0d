"""Speculative cascades (Narasimhan et al., ICLR 2025): exact engine, per-token traces, baselines."""
from .engine import MAX_GAMMA, MAX_NEW_TOKENS, generate, stream
from .models import Pair, load_pair
from .rules import ALPHA_FREE, ALPHA_RANGE, DESCRIPTIONS, RULES, critical_alpha, target_distribution
from .trace import Trace

__all__ = ["ALPHA_FREE", "ALPHA_RANGE", "DESCRIPTIONS", "MAX_GAMMA", "MAX_NEW_TOKENS", "RULES", "Pair", "Trace",
           "critical_alpha", "generate", "load_pair", "stream", "target_distribution"]
