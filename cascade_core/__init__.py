"""Speculative cascades (Narasimhan et al., ICLR 2025): exact engine, per-token traces, baselines."""
from .engine import finish, generate, generate_batch, mapped, stream, stream_batch, stream_lanes
from .models import load_pair
from .pair import Pair
from .replay import replay_block, replay_steps
from .distributions import Distributions
from .rules import RULES, Rule, critical_alpha, get_rule
from .sampling import output_distribution, target_distribution
from .settings import MAX_BATCH_ROWS, MAX_GAMMA, MAX_NEW_TOKENS
from .trace import Trace

__all__ = ["MAX_BATCH_ROWS", "MAX_GAMMA", "MAX_NEW_TOKENS", "RULES", "Distributions", "Pair", "Rule", "Trace",
           "critical_alpha", "finish", "generate", "generate_batch", "get_rule", "load_pair", "mapped",
           "output_distribution", "replay_block", "replay_steps", "stream", "stream_batch", "stream_lanes", "target_distribution"]
