"""Speculative cascades (Narasimhan et al., ICLR 2025): exact engine, per-token traces, baselines."""
from cascade_core.decoding.generation import (finish, generate, generate_batch, mapped, stream, stream_batch,
                                              stream_lanes)
from cascade_core.decoding.replay import replay_block, replay_steps
from cascade_core.decoding.run_settings import MAX_BATCH_ROWS, MAX_GAMMA, MAX_NEW_TOKENS
from cascade_core.decoding.trace import Trace
from cascade_core.formats.loading import load_pair
from cascade_core.formats.pair import Pair
from cascade_core.method.distributions import Distributions
from cascade_core.method.rules import RULES, Rule, critical_alpha, get_rule
from cascade_core.method.sampling import output_distribution, target_distribution

__all__ = ["MAX_BATCH_ROWS", "MAX_GAMMA", "MAX_NEW_TOKENS", "RULES", "Distributions", "Pair", "Rule", "Trace",
           "critical_alpha", "finish", "generate", "generate_batch", "get_rule", "load_pair", "mapped",
           "output_distribution", "replay_block", "replay_steps", "stream", "stream_batch", "stream_lanes",
           "target_distribution"]
