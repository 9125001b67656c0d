"""A sweep's chains on Ray: a local instance (one worker per core) or an existing cluster. Ray schedules the
tasks; each worker process loads its pair once and keeps it for every chain it is given."""
import os
from pathlib import Path

import ray

from .chain import load_named_pair, run_chain

ROOT = Path(__file__).resolve().parent.parent
_PAIRS = {}  # per worker process: the pairs it has loaded, by spec


def _chain_task(pair_spec, item, rule, alphas, seed, settings):
    import torch

    torch.set_num_threads(1)  # one core per task: Ray gives each worker one
    if pair_spec not in _PAIRS:
        _PAIRS[pair_spec] = load_named_pair(pair_spec)
    return run_chain(_PAIRS[pair_spec], item, rule, alphas, seed, **settings)


def connect(address):
    """A local Ray instance (address None) or the cluster at address; ValueError if it cannot be reached."""
    env = {key: value for key, value in os.environ.items() if key.startswith(("HF_", "TRANSFORMERS_", "SPECULATIVE"))}
    if address:  # a remote cluster gets this repository's code; it must have the requirements installed
        runtime_env = {"working_dir": str(ROOT), "env_vars": env,
                       "excludes": [".venv", ".git", "runs", "artifacts", "docs", "*.png"]}
    else:
        runtime_env = {"env_vars": {**env, "PYTHONPATH": str(ROOT)}}
    try:
        ray.init(address=address, num_cpus=None if address else len(os.sched_getaffinity(0)),
                 include_dashboard=False, log_to_driver=False, runtime_env=runtime_env, ignore_reinit_error=True)
    except Exception as error:  # refused connections, bad addresses, a cluster of another version
        raise ValueError(f"cannot reach the Ray cluster at {address!r}: {type(error).__name__}: {error}") from None


def run_on_ray(pair_spec, chains, settings, address, finished):
    """Run (item, rule, alphas, seed) chains as Ray tasks; ``finished(rows)`` is called as each one returns."""
    connect(address)
    task = ray.remote(num_cpus=1, max_retries=1)(_chain_task)
    pending = [task.remote(pair_spec, item, rule, alphas, seed, settings) for item, rule, alphas, seed in chains]
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        finished(ray.get(ready[0]))
