"""A row: one generation's checked settings, its trace being built and its last token, as the block loop reads it.
Built before any model call (``start_row``), so a bad setting is refused in one sentence before anything runs."""
import torch

from cascade_core.decoding.prompt_checks import check_length
from cascade_core.decoding.run_settings import INPUT_FIELDS, TARGET_ALONE, RunSettings, check_prompt
from cascade_core.decoding.trace import Detokenizer, Trace, resumed
from cascade_core.method.rules import RULES


def encode_prompt(tokenizer, prompt, chat=True):
    """Token ids for a prompt, through the chat template when the tokenizer has one and chat is on."""
    check_prompt(prompt)
    if chat and getattr(tokenizer, "chat_template", None):
        # enable_thinking=False keeps Qwen3's answers short; templates without the variable ignore it.
        ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                            tokenize=True, enable_thinking=False, return_dict=False)
        return list(ids)
    return tokenizer(prompt, add_special_tokens=True)["input_ids"]

class Row:
    """One generation's RunSettings (its gamma: a number, or "auto"), its trace being built and its last token."""

    def __init__(self, pair, trace, settings):
        self.trace, self.settings = trace, settings
        eos = pair.eos_token_ids if settings.eos_token_ids is None else settings.eos_token_ids
        self.eos = set(eos) if settings.stop_at_eos else set()
        self.accepted = [0.0, 0]  # the sum and count of its proposals' acceptance probabilities (gamma "auto")
        # the blocks this run has taken: its next block's index, as its trace records it (a resumed run counts from
        # 0 again; a replay starts at the block it replays)
        self.blocks = 0
        self.started = None  # when its prefill began (perf_counter): its wall clock's start (batch_block.py)
        # a replay's (cascade_core/decoding/replay.py): which block to record in full, asked (positions before it, the
        # Block) of every block, and that block's record
        self.watch, self.watched = None, None
        sequence = trace.prompt_ids + trace.tokens
        self.last, self.history = sequence[-1], sequence[:-1]

    @property
    def uses_draft(self):
        return self.settings.rule != "target"

    @property
    def uses_target(self):
        return self.settings.rule != "draft"

    @property
    def counters(self):
        return self.trace.counters

    def block_length(self, gamma):
        """gamma + 1 positions (fewer at the end); one for baselines, sequential cascades and the target alone."""
        if RULES[self.settings.rule].kind == "baseline" or self.settings.sequential or gamma == TARGET_ALONE:
            return 1
        return min(gamma + 1, self.settings.max_new_tokens - len(self.trace.positions))

    def allowed(self, logits, start, columns=None):
        """logits ``[n, V]`` for positions start .. start + n - 1, with end-of-text at -inf before min_new_tokens
        (as transformers' min-length processors do): both models' distributions lose it there, so pi, built
        from them, cannot emit it, and the rules and the verification stay exact for what is left. ``columns``:
        the target id of each column, where the logits cover a sub-vocabulary."""
        early = self.settings.min_new_tokens - start
        if early <= 0 or not self.eos:
            return logits
        ids = columns if columns is not None else torch.arange(logits.shape[-1], device=logits.device)
        eos = torch.isin(ids, torch.tensor(sorted(self.eos), device=ids.device)).nonzero().squeeze(-1)
        logits = logits.clone()
        logits[:early, eos] = float("-inf")
        return logits

    def fail(self, error):
        self.trace.error, self.trace.finished, self.trace.stop_reason = str(error), True, "error"

    def checkpoint(self):
        """What a block changes in a row (its trace's length and state, its counters, its block count, its last
        token), to undo it."""
        trace = self.trace
        return (len(trace.positions), trace.finished, trace.stop_reason, trace.error, self.last, tuple(self.accepted),
                trace.counters.state(), self.blocks)

    def restore(self, state):
        n, finished, reason, error, self.last, accepted, counters, self.blocks = state
        trace, self.accepted = self.trace, list(accepted)
        del trace.positions[n:]
        trace.finished, trace.stop_reason, trace.error = finished, reason, error
        trace.counters.restore(counters)

def start_row(pair, settings, prompt=None, *, prompt_ids=None, resume=None):
    """A row's checked settings (RunSettings) and its empty (or resumed) trace, before any model call."""
    if resume is not None:
        old, k = resume
        if pair.drafting.q_reads_block_start:
            k = block_start(old, k)
        prompt, prompt_ids = old.prompt, list(old.prompt_ids)
        prefix = [resumed(pos, old.settings, settings.rule, settings.alpha) for pos in old.positions[:k]]
    else:
        prefix = []
        if prompt_ids is None:
            check_length(check_prompt(prompt), pair, settings.max_new_tokens)  # before the tokenizer reads it
            prompt_ids = encode_prompt(pair.tokenizer, prompt, settings.chat)
        prompt_ids = list(prompt_ids)
    settings.check_for(pair, prompt_ids)
    trace = Trace(prompt_ids=prompt_ids, settings=settings.recorded(pair), prompt=prompt, positions=prefix,
                  resumed_from=len(prefix), detokenizer=Detokenizer.for_tokenizer(pair.tokenizer))
    row = Row(pair, trace, settings)
    if prefix and (prefix[-1]["token"] in row.eos or len(prefix) >= settings.max_new_tokens):
        trace.finished, trace.stop_reason = True, "eos" if prefix[-1]["token"] in row.eos else "max_new_tokens"
    return row


def row_of(pair, fields, **defaults):
    """A started row from a batch's dict of fields: a prompt, prompt_ids or resume, and its settings (a RunSettings
    as ``settings``, RunSettings' keywords, or both); ``defaults`` fill in what the keywords leave out (the batch's
    gamma) where no RunSettings is given."""
    inputs = {name: fields[name] for name in INPUT_FIELDS if name in fields}
    keywords = {name: value for name, value in fields.items() if name not in INPUT_FIELDS + ("settings",)}
    base = fields.get("settings")
    settings = RunSettings.of(**{**defaults, **keywords}) if base is None else RunSettings.of(base, **keywords)
    return start_row(pair, settings, **inputs)


def block_start(trace, k):
    """Where the block holding position k began. Where a draft's q depends on its step within a block (a head's
    first step reads the target's features, the others its own outputs), a resumed run restarts that block: its
    tokens before k come out again as they were, and it equals a fresh run at a fixed gamma."""
    positions, start = trace.positions, min(k, len(trace.positions))
    if start == len(positions) or start == 0:
        return start
    while start > 0 and start != trace.resumed_from and positions[start - 1]["block"] == positions[start]["block"]:
        start -= 1
    return start
