"""An independent draft model: a causal LM with a KV cache of its own, which reads only tokens."""
from cascade_core.decoding.cached_model import CachedModel
from cascade_core.decoding.proposals import propose_chain


class ModelDraft:
    """The Draft protocol (cascade_core/decoding/draft_protocol.py) over a draft model's cached forward."""

    name, runs_alone, compiles, q_reads_block_start = "model", True, True, False
    described, label = "a draft model", "draft model"

    @staticmethod
    def drives(module):
        return True

    @staticmethod
    def feature_layers(module):
        return ()

    @staticmethod
    def vocabulary(module):
        """The target ids it can propose where its output head covers a subset (SubVocabularyHead), else None."""
        ids = getattr(module.get_output_embeddings(), "token_ids", None)
        return None if ids is None else set(ids.tolist())

    def __init__(self, pair, counters, cache_length):
        compiled = (pair.compiled or {}).get("draft")
        self.cached = CachedModel(pair.draft, "draft", pair.vocab_size, counters, compiled, cache_length)

    model = property(lambda self: self.cached.model)
    seconds = property(lambda self: self.cached.seconds)

    def prefill(self, histories, features):
        return self.cached.prefill(histories)

    def join(self, histories, counters, features):
        return self.cached.join(histories, counters)

    def propose(self, rows, lengths, uniforms):
        return propose_chain(self.cached, self.model, rows, lengths, uniforms)

    def catch_up(self, row, proposal, kept, features):
        """It read [last, x_0 .. x_{n-2}] (and x_{n-1}'s step computed nothing kept): past the kept ones, they go."""
        if proposal is not None:
            self.cached.forget(row, len(proposal.tokens) - len(kept))

    def pass_over(self, row, token, features):
        self.cached.pending[row].append(token)

    def keep_rows(self, rows):
        self.cached.keep_rows(rows)

    def settle(self):
        self.cached.settle()

    def state(self):
        return self.cached.state()

    def restore(self, state):
        self.cached.restore(state)
