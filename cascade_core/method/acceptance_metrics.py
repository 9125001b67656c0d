"""Acceptance metrics in the schema the serving engines report, so that a run here reads like a request there.

vLLM (PR #48915, `--per-request-spec-decode-metrics detailed`) puts per request under
`metrics.speculative_decoding`: num_spec_steps, num_draft_tokens, num_accepted_draft_tokens, draft_acceptance_rate,
mean_acceptance_length, acceptance_histogram (index j: the verify steps that kept exactly j draft tokens),
num_spec_tokens and per_step_accepted; llama.cpp (PR #24536) and vLLM's server-wide metrics add the acceptance rate
per draft position, accepted at position j / verify steps. One difference of mechanics: vLLM's verify step always
adds one token (the correction, or a bonus token when all k drafts pass), so its mean acceptance length is
1 + accepted / steps; this engine's block drafts gamma + 1 tokens and adds no bonus token (docs/spec.md), so here
mean_acceptance_length is what that formula stands for, the tokens a verify step emitted, kept drafts plus the
correction where one was rejected."""

KEPT = ("accepted", "deferred")  # the sources (trace.SOURCES) at which the draft's own token was kept


def metrics(steps):
    """The engines' schema from [(drafted, kept)], one pair per verify step (the target's pass over a block the
    draft proposed), in order; None where the run had no such step (a baseline, a sequential cascade, or gamma
    "auto"'s floor throughout)."""
    if not steps:
        return None
    n = len(steps)
    drafted = sum(d for d, _ in steps)
    kept = [k for _, k in steps]
    emitted = sum(k + (k < d) for d, k in steps)  # a rejection ends a block with its correction
    k_max = max(d for d, _ in steps)
    return {
        "num_spec_steps": n,
        "num_draft_tokens": drafted,
        "num_accepted_draft_tokens": sum(kept),
        "draft_acceptance_rate": sum(kept) / drafted,
        "mean_acceptance_length": emitted / n,
        "acceptance_histogram": [kept.count(j) for j in range(k_max + 1)],
        "num_spec_tokens": k_max,
        "per_step_accepted": kept,
        "acceptance_rate_per_position": [sum(k > j for k in kept) / n for j in range(k_max)],
    }


def trace_steps(positions, drafted):
    """[(drafted, kept)] for a run's verify steps: its positions (a Trace's, from where the run began) grouped by
    the block that emitted them, gamma "auto"'s floor left out (the target's own token, nothing drafted), beside
    ``drafted``, the number of tokens the draft proposed for each of those blocks, in order (the row's counters).
    A block cut by end-of-text counts the kept drafts it emitted."""
    blocks = []
    for pos in positions:
        if pos["source"] == "target":
            continue
        if not blocks or blocks[-1][0] != pos["block"]:
            blocks.append([pos["block"], 0])
        blocks[-1][1] += pos["source"] in KEPT
    return [(d, kept) for d, (_, kept) in zip(drafted, blocks)]
