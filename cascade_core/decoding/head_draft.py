"""An EAGLE-3 head as the engine's draft (its format and loading: cascade_core/formats/eagle3_head.py).

Per row it keeps ``carry``: the g of each slot of the row's next call, which reads the ids still pending in the
cached head and then the row's input. After the target reads a row's history, the head reads (features_t, token
t + 1) for all but the last position and carries the last feature; each drafting step reads (g, x) and carries
its own output h; ``catch_up`` forgets the block's drafted entries and carries the target's features of the kept
positions, whose ids the cached head reads with the next block's first input in one call. The target's features
are handed in by the engine (from the target's pass), never read from the target's object.
"""
import torch

from cascade_core.decoding.cached_model import CachedModel
from cascade_core.decoding.proposals import propose_chain
from cascade_core.formats.eagle3_head import Eagle3Head


class HeadDraft:
    """The Draft protocol (cascade_core/decoding/draft_protocol.py) over an EAGLE-3 head."""

    name, runs_alone, compiles, q_reads_block_start = "head", False, False, True
    described, label = "an EAGLE-3 head, which reads the target's hidden states", "EAGLE-3 head"

    @staticmethod
    def drives(module):
        return isinstance(module, Eagle3Head)

    @staticmethod
    def feature_layers(module):
        return module.aux_layers

    @staticmethod
    def vocabulary(module):
        """The target ids of its draft vocabulary (q is zero elsewhere)."""
        return set(module.token_ids.tolist())

    def __init__(self, pair, counters, cache_length):
        self.cached = CachedModel(pair.draft, "draft", pair.vocab_size, counters)
        self.carry = [None] * len(counters)  # per row: ("features" or "hidden", [k, width]), k = pending ids + 1
        self.columns = pair.draft.token_ids  # the target id of each logit column

    model = property(lambda self: self.cached.model)
    seconds = property(lambda self: self.cached.seconds)

    def _read(self, histories, features, read):
        """Prefill or join: each row reads its history's pairs but the last; the last feature is carried. A row the
        target read nothing of (a one-token prompt, or a failed prefill) starts from g = 0."""
        histories = [h if f is not None else [] for h, f in zip(histories, features)]
        extra = [{"features": f[:-1]} if h else None for h, f in zip(histories, features)]
        carry = [("features", f[-1:]) if h else None for h, f in zip(histories, features)]
        return carry, read([list(h[1:]) for h in histories], extra)

    def prefill(self, histories, features):
        self.carry, errors = self._read(histories, features, self.cached.prefill)
        return errors

    def join(self, histories, counters, features):
        carry, errors = self._read(histories, features, lambda h, extra: self.cached.join(h, counters, extra))
        self.carry += carry
        return errors

    def step(self, inputs):
        """One drafting step: each feeding row reads its pending ids and its input with the carried g."""
        kinds = {self.carry[r][0] for r, ids in enumerate(inputs) if ids and self.carry[r] is not None}
        if len(kinds) > 1:  # rows at different steps of a block never share a call: the engine keeps them in step
            raise RuntimeError("rows at different drafting steps in one head call")
        kind = kinds.pop() if kinds else "hidden"
        extra = [{kind: self.carry[r][1]} if ids and self.carry[r] is not None else None
                 for r, ids in enumerate(inputs)]
        logits = self.cached(inputs, extra)
        for r, ids in enumerate(inputs):
            if ids:
                self.carry[r] = ("hidden", self.cached.features[r][-1:])
        return logits

    def propose(self, rows, lengths, uniforms):
        """q over the head's own vocabulary (its logits' columns), widened to the target's once a block."""
        return propose_chain(self.step, self.model, rows, lengths, uniforms, self.columns, self.cached.vocab_size)

    def catch_up(self, row, proposal, kept, features):
        """Its drafting steps' own entries go but the first (it read true features); the kept positions' true
        features (the target read [last, x_0 .. x_{m-2}]: m slots, paired with x_0 .. x_{m-1}, the last of which
        is the row's next input) are carried for the next block."""
        if proposal is None:
            return
        self.cached.forget(row, len(proposal.tokens) - 1)
        self.cached.pending[row] = list(kept[:-1])
        self.carry[row] = ("features", features[: len(kept)])

    def pass_over(self, row, token, features):
        """The token joins the ids pending and its true feature the carried ones (it pairs with the next input); a
        row with nothing read yet had g = 0 for the token, which zero features give (fc has no bias)."""
        _, carried = self.carry[row] or ("features", features[:1].new_zeros(features[:1].shape))
        self.cached.pending[row].append(token)
        self.carry[row] = ("features", torch.cat([carried, features[:1]]))

    def keep_rows(self, rows):
        self.cached.keep_rows(rows)
        self.carry = [self.carry[r] for r in rows]

    def settle(self):
        self.cached.settle()

    def state(self):
        return self.cached.state(), list(self.carry)

    def restore(self, state):
        cached, carry = state
        self.cached.restore(cached)
        self.carry = list(carry)
