"""The draft's side of a block: the ``Draft`` protocol every kind of draft implements for a batch of rows
(model_draft.py: an independent draft model; head_draft.py: an EAGLE-3 head), and ``kind_of``, which names the
implementation of a pair's draft (the one place that asks what a draft is).

Each kind declares what it can do, and the engine asks that instead of what the draft is: ``runs_alone`` (it can
decode without the target: draft-only, the cascade, the sequential cascade), ``compiles`` (the static-cache
path), ``q_reads_block_start`` (its q at a position depends on where its block began, so a resumed run restarts
that block), ``feature_layers(module)`` (the target's residual streams it reads, handed over from the target's
passes), ``vocabulary(module)`` (the tokens it can propose, where not all) and ``described``/``label`` (for
sentences).

**A tree-shaped draft** (EAGLE-2, Medusa) would implement the same calls with ``propose`` returning a tree per
row: its nodes' tokens and q, each node's parent, and a ``target_inputs`` of all its nodes in one pass with a
tree mask instead of a chain's ``[last, x_0 .. x_{n-2}]``; the verification would walk the tree's paths and
``catch_up`` keep the accepted one. ``Proposal.target_inputs`` is that seam: the engine asks a proposal what
the target reads, never builds it from the tokens itself.
"""
from typing import Protocol

from cascade_core.decoding.head_draft import HeadDraft
from cascade_core.decoding.model_draft import ModelDraft


class Draft(Protocol):
    """A draft over a batch of rows, in the engine's steps (docs/spec.md, "One block"). Built per batch as
    ``kind(pair, counters, cache_length)``; every call is counted and timed in the rows' counters."""

    name: str  # "model" or "head": the pair's draft kind, as links and the API name it
    runs_alone: bool
    compiles: bool
    q_reads_block_start: bool
    described: str
    label: str
    seconds: float  # in calls so far: a block's time beyond them is the engine's own

    def prefill(self, histories, features):
        """Read each row's history before its first block (``features[row]``: what the target's reading of it
        handed over, None where the kind reads none); returns per row None or the error it raised."""

    def join(self, histories, counters, features):
        """``prefill`` for rows that join between blocks (their counters added)."""

    def propose(self, rows, lengths, uniforms):
        """Step 1: per row a Proposal of ``lengths[row]`` tokens drawn with the row's draft uniforms, or None."""

    def catch_up(self, row, proposal, kept, features):
        """After step 3: the row's emitted tokens ``kept`` (accepted proposals and the correction) are what it has
        read; ``features``: the target's features of this block's pass for the row (a slot per token it read)."""

    def pass_over(self, row, token, features):
        """A block the target took alone (gamma "auto"'s floor): the draft proposed nothing and reads ``token``, the
        row's input of that block, with its next call; ``features``: the target's features of it."""

    def keep_rows(self, rows):
        """Only these rows (indices) go on."""

    def settle(self):
        """After a block: the caches tidy up."""

    def state(self):
        """Its rows' state, by reference, to undo a block that failed part-way (``restore``)."""

    def restore(self, state):
        """Back to ``state``."""


def kind_of(module):
    """The Draft implementation for a pair's draft module: a head reads the target's hidden states, anything else is
    a model of its own."""
    return HeadDraft if HeadDraft.drives(module) else ModelDraft


def check_alone(kind, rule, sequential):
    """Refuse, in one sentence, settings that need the draft to decode alone where this kind cannot."""
    if kind.runs_alone:
        return
    if rule == "draft":
        raise ValueError(f"rule 'draft' (draft-only) needs a draft that runs alone, and this pair's draft is "
                         f"{kind.described}; load the pair with draft='model'")
    if sequential:
        raise ValueError(f"sequential=True calls the target only where the rule defers, and this pair's draft is "
                         f"{kind.described} at every position; load the pair with draft='model'")
