"""Speculative cascades (Narasimhan et al., ICLR 2025): exact engine, per-token traces, baselines."""
from .engine import finish, generate, mapped, stream
from .models import Pair, load_pair
from .rules import RULES, Distributions, Rule, critical_alpha, get_rule
from .sampling import output_distribution, target_distribution
from .settings import MAX_GAMMA, MAX_NEW_TOKENS
from .trace import Trace

__all__ = ["MAX_GAMMA", "MAX_NEW_TOKENS", "RULES", "Distributions", "Pair", "Rule", "Trace", "critical_alpha",
           "finish", "generate", "get_rule", "load_pair", "mapped", "output_distribution", "stream", "target_distribution"]
