"""A row: one generation's checked settings, its trace being built and its last token, as the block loop reads it.
Built before any model call (``start_row``), so a bad setting is refused in one sentence before anything runs."""
from .drafts import check_alone
from .rules import RULES, get_rule
from .settings import check_prompt, check_settings, check_stopping
from .trace import Detokenizer, Trace, source_under


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
    """One generation's settings (its gamma: a number, or "auto"), its trace being built and its last token."""

    def __init__(self, pair, trace, rule, alpha, gamma, temperature, seed, max_new_tokens, stop_at_eos, sequential,
                 eos_token_ids=None, min_new_tokens=0, stop=None):
        self.trace, self.rule, self.alpha, self.gamma, self.sequential = trace, rule, alpha, gamma, sequential
        self.temperature, self.seed, self.max_new_tokens = temperature, seed, max_new_tokens
        self.eos = set(pair.eos_token_ids if eos_token_ids is None else eos_token_ids) if stop_at_eos else set()
        self.min_new_tokens, self.stop = min_new_tokens, stop
        self.accepted = [0.0, 0]  # the sum and count of its proposals' acceptance probabilities (gamma "auto")
        self.trace.counters.update(target_calls=0, draft_calls=0, target_seconds=0.0, draft_seconds=0.0,
                                   prefill_seconds=0.0, wall_seconds=0.0)
        sequence = trace.prompt_ids + trace.tokens
        self.last, self.history = sequence[-1], sequence[:-1]

    @property
    def uses_draft(self):
        return self.rule != "target"

    @property
    def uses_target(self):
        return self.rule != "draft"

    @property
    def counters(self):
        return self.trace.counters

    def block_length(self, gamma):
        """gamma + 1 positions (fewer at the end); one for baselines and sequential cascades."""
        if RULES[self.rule].kind == "baseline" or self.sequential:
            return 1
        return min(gamma + 1, self.max_new_tokens - len(self.trace.positions))

    def allowed(self, logits, start):
        """logits ``[n, V]`` for positions start .. start + n - 1, with end-of-text at -inf before min_new_tokens
        (as transformers' min-length processors do): both models' distributions lose it there, so pi, built
        from them, cannot emit it, and the rules and the verification stay exact for what is left."""
        early, eos = self.min_new_tokens - start, sorted(i for i in self.eos if i < logits.shape[-1])
        if early <= 0 or not eos:
            return logits
        logits = logits.clone()
        logits[:early, eos] = float("-inf")
        return logits

    def fail(self, error):
        self.trace.error, self.trace.finished, self.trace.stop_reason = str(error), True, "error"

    def checkpoint(self):
        """What a block changes in a row (its trace's length and state, its counters, its last token), to undo it."""
        trace = self.trace
        counters = {k: (list, len(v)) if isinstance(v, list) else (None, v) for k, v in trace.counters.items()}
        return (len(trace.positions), trace.finished, trace.stop_reason, trace.error, self.last, tuple(self.accepted),
                counters)

    def restore(self, state):
        n, finished, reason, error, self.last, accepted, counters = state
        trace, self.accepted = self.trace, list(accepted)
        del trace.positions[n:]
        trace.finished, trace.stop_reason, trace.error = finished, reason, error
        for key in [k for k in trace.counters if k not in counters]:
            del trace.counters[key]
        for key, (kind, value) in counters.items():
            if kind is list:
                del trace.counters[key][value:]
            else:
                trace.counters[key] = value

def start_row(pair, gamma, prompt=None, *, rule="v3", alpha=0.3, temperature=1.0, seed=0, max_new_tokens=64,
              chat=True, prompt_ids=None, resume=None, stop_at_eos=True, details=True, sequential=False,
              eos_token_ids=None, min_new_tokens=0, stop=None):
    """A row's checked settings and its empty (or resumed) trace, before any model call."""
    get_rule(rule)
    check_alone(pair.drafting, rule, sequential)
    if resume is not None:
        old, k = resume
        if pair.drafting.q_reads_block_start:
            k = block_start(old, k)
        prompt, prompt_ids = old.prompt, list(old.prompt_ids)
        prefix = [dict(pos) for pos in old.positions[:k]]
        for pos in prefix:
            pos["source"] = source_under(pos, rule, alpha)
    else:
        prefix = []
        if prompt_ids is None:
            prompt_ids = encode_prompt(pair.tokenizer, prompt, chat)
        prompt_ids = list(prompt_ids)
    gamma, temperature, seed, max_new_tokens = check_settings(pair, prompt_ids, rule, alpha, gamma, temperature, seed,
                                                              max_new_tokens)
    eos_token_ids, min_new_tokens = check_stopping(eos_token_ids, min_new_tokens, stop, max_new_tokens)
    settings = dict(rule=rule, alpha=alpha, gamma=gamma, temperature=temperature, seed=seed, details=details,
                    sequential=sequential, max_new_tokens=max_new_tokens, chat=chat, pair=pair.name,
                    alpha_range=RULES[rule].alpha_range)
    if min_new_tokens:
        settings["min_new_tokens"] = min_new_tokens
    trace = Trace(prompt_ids=prompt_ids, settings=settings, prompt=prompt, positions=prefix, resumed_from=len(prefix),
                  detokenizer=Detokenizer(pair.tokenizer))
    row = Row(pair, trace, rule, alpha, gamma, temperature, seed, max_new_tokens, stop_at_eos, sequential,
              eos_token_ids, min_new_tokens, stop)
    if prefix and (prefix[-1]["token"] in row.eos or len(prefix) >= max_new_tokens):
        trace.finished, trace.stop_reason = True, "eos" if prefix[-1]["token"] in row.eos else "max_new_tokens"
    return row


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
