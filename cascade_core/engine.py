"""The speculative-cascade loop: draft proposes, target verifies in one pass, a rule decides.

Invariant: both KV caches hold every token of the sequence except the last one, ``last``, which is
the next input of both models. A block feeds ``[last, x_0 .. x_{n-2}]`` through the draft (one token at
a time, sampling x_0 .. x_{n-1}) and through the target (one pass), so both see the same inputs, and
on a rejection at position j both caches are cropped back to ``[.., last, x_0 .. x_{j-1}]``.
"""
import functools
import inspect
import math
import time

import torch
from transformers import DynamicCache

from .rules import ALPHA_RANGE, check_alpha, check_rule, critical_alphas
from .sampling import DRAFT, position_uniforms, sample_inverse_cdf, sampling_distribution, verify
from .trace import Trace, _source

TOP_K = 10
MAX_GAMMA = 16
MAX_NEW_TOKENS = 2048


def encode_prompt(tokenizer, prompt, chat=True):
    """Token ids for a prompt, through the chat template when the tokenizer has one and chat is on."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("the prompt is empty; type something for the models to continue")
    if chat and getattr(tokenizer, "chat_template", None):
        # enable_thinking=False keeps Qwen3's answers short; templates without the variable ignore it.
        ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                            tokenize=True, enable_thinking=False, return_dict=False)
        return list(ids)
    return tokenizer(prompt, add_special_tokens=True)["input_ids"]


def check_settings(pair, prompt_ids, rule, alpha, gamma, temperature, max_new_tokens):
    check_alpha(rule, alpha)
    if not isinstance(gamma, int) or not 1 <= gamma <= MAX_GAMMA:
        raise ValueError(f"gamma must be an integer in 1..{MAX_GAMMA}, got {gamma!r}")
    if not isinstance(max_new_tokens, int) or not 1 <= max_new_tokens <= MAX_NEW_TOKENS:
        raise ValueError(f"max_new_tokens must be an integer in 1..{MAX_NEW_TOKENS}, got {max_new_tokens!r}")
    if not isinstance(temperature, (int, float)) or not 0 <= temperature <= 10:
        raise ValueError(f"temperature must be in [0, 10], got {temperature!r}")
    if not prompt_ids:
        raise ValueError("the prompt is empty; type something for the models to continue")
    limit = pair.max_positions
    if len(prompt_ids) + max_new_tokens > limit:
        raise ValueError(f"the prompt ({len(prompt_ids)} tokens) plus max_new_tokens ({max_new_tokens}) exceeds "
                         f"the models' context of {limit} tokens; shorten the prompt or ask for fewer tokens")


@functools.cache
def cache_argument(model_class):
    """transformers renamed forward's ``past_key_values`` to ``cache`` (5.2x); older 5.x silently ignores ``cache=``."""
    return "cache" if "cache" in inspect.signature(model_class.forward).parameters else "past_key_values"


def forward(model, cache, ids, vocab_size, logits_to_keep=0):
    """Logits [len(ids) or logits_to_keep, vocab_size] for ids appended to the cache, checked for NaN/inf."""
    input_ids = torch.tensor([ids], device=model.device)
    logits = model(input_ids=input_ids, use_cache=True, logits_to_keep=logits_to_keep,
                   **{cache_argument(type(model)): cache}).logits[0, :, :vocab_size]
    if not torch.isfinite(logits).all():
        raise ValueError(f"{model.config.name_or_path or 'a model'} produced NaN or inf logits; "
                         "the weights or the dtype are broken for this input")
    return logits


def crop(cache, n_tokens):
    if n_tokens:
        cache.crop(-n_tokens)  # transformers 5: a negative argument removes that many tokens


class Decoder:
    """Turns emitted ids into text pieces that concatenate to the decoded text (multi-byte characters
    split over tokens land on the token that completes them)."""

    WINDOW = 8

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def pieces(self, tokens, start):
        if self.tokenizer is None:
            return [""] * (len(tokens) - start)
        out = []
        for i in range(start, len(tokens)):
            window = tokens[max(0, i - self.WINDOW): i]
            before = self.tokenizer.decode(window)
            after = self.tokenizer.decode(window + [tokens[i]])
            out.append("" if after.endswith("\ufffd") else after[len(before.rstrip("\ufffd")):])
        return out

    def singles(self, ids):
        if self.tokenizer is None:
            return [""] * len(ids)
        return self.tokenizer.batch_decode([[i] for i in ids])


def _top(d, decoder):
    probs, ids = d.topk(min(TOP_K, d.shape[-1]), dim=-1)
    ids, probs = ids.tolist(), probs.tolist()
    texts = iter(decoder.singles([i for row in ids for i in row]))
    return [[[i, next(texts), pr] for i, pr in zip(row_i, row_p)] for row_i, row_p in zip(ids, probs)]


def position_records(decoder, block, x, a_star, q_stat=None, p_stat=None, q=None, p=None, accept=None):
    """One dict per position of a block (see Trace); tensors are [m, V] or [m], a_star one dict per position."""
    m = len(x)
    none = [None] * m

    def col(t):
        return t.tolist() if t is not None else none

    x_t = torch.tensor(x, device=(q if q is not None else p).device).unsqueeze(-1)
    top_q = _top(q_stat, decoder) if q_stat is not None else none
    top_p = _top(p_stat, decoder) if p_stat is not None else none
    max_q = col(q_stat.max(-1).values if q_stat is not None else None)
    max_p = col(p_stat.max(-1).values if p_stat is not None else None)
    q_x = col(q_stat.gather(-1, x_t).squeeze(-1) if q_stat is not None else None)
    p_x = col(p_stat.gather(-1, x_t).squeeze(-1) if p_stat is not None else None)
    tv = col((p - q).clamp_min(0).sum(-1) if q is not None and p is not None else None)
    acc = col(accept)
    texts = decoder.singles(x)
    return [dict(proposal=x[i], proposal_text=texts[i], block=block, max_q=max_q[i], max_p=max_p[i], tv=tv[i],
                 q_x=q_x[i], p_x=p_x[i], accept_prob=acc[i], a_star=a_star[i], top_q=top_q[i], top_p=top_p[i])
            for i in range(m)]


class Cascade:
    """Mutable decoding state for one generation: caches, the last token, the trace being built."""

    def __init__(self, pair, trace, rule, alpha, gamma, temperature, seed, max_new_tokens, stop_at_eos):
        self.pair, self.trace = pair, trace
        self.rule, self.alpha, self.gamma, self.temperature = rule, alpha, gamma, temperature
        self.seed, self.max_new_tokens = seed, max_new_tokens
        self.eos = pair.eos_token_ids if stop_at_eos else set()
        self.decoder = Decoder(pair.tokenizer)
        self.vocab = pair.vocab_size
        self.uses_draft = rule != "target"
        self.uses_target = rule != "draft"
        self.target_cache = DynamicCache(config=pair.target.config) if self.uses_target else None
        self.draft_cache = DynamicCache(config=pair.draft.config) if self.uses_draft else None
        self.counters = trace.counters
        self.counters.update(target_calls=0, draft_calls=0, target_seconds=0.0, draft_seconds=0.0,
                             prefill_seconds=0.0, wall_seconds=0.0)

    @property
    def position(self):
        return len(self.trace.positions)

    def prefill(self):
        start = time.perf_counter()
        seq = self.trace.prompt_ids + self.trace.tokens
        if len(seq) > 1:
            if self.uses_target:
                forward(self.pair.target, self.target_cache, seq[:-1], self.vocab, logits_to_keep=1)
            if self.uses_draft:
                forward(self.pair.draft, self.draft_cache, seq[:-1], self.vocab, logits_to_keep=1)
        self.last = seq[-1]
        self.counters["prefill_seconds"] = time.perf_counter() - start

    def _forward(self, role, ids):
        """A counted, timed forward of one model (the timing gives the measured cost ratio c)."""
        model, cache = (self.pair.target, self.target_cache) if role == "target" else (self.pair.draft, self.draft_cache)
        start = time.perf_counter()
        logits = forward(model, cache, ids, self.vocab)  # its NaN check synchronises CUDA, so the time is real
        self.counters[f"{role}_seconds"] += time.perf_counter() - start
        self.counters[f"{role}_calls"] += 1
        return logits

    def step(self):
        """Run one block; append its positions to the trace."""
        n = min(self.gamma + 1, self.max_new_tokens - self.position)
        uniforms = position_uniforms(self.seed, range(self.position, self.position + n))
        if self.rule in ("target", "draft"):
            self._plain_step(uniforms[:1])
        else:
            self._cascade_step(uniforms)

    def _plain_step(self, uniforms):
        """Target-only or draft-only: sample one token from the model with the position's draft uniform."""
        role = "target" if self.uses_target else "draft"
        logits = self._forward(role, [self.last])
        stat, dist = sampling_distribution(logits, self.temperature)
        token = int(sample_inverse_cdf(dist, uniforms[:, DRAFT])[0])
        a_star = [{self.rule: math.inf if self.uses_target else -math.inf}]
        dists = dict(p_stat=stat, p=dist) if self.uses_target else dict(q_stat=stat, q=dist)
        record = position_records(self.decoder, self.counters[f"{role}_calls"] - 1, [token], a_star, **dists)
        self._emit(record, [token], ["deferred" if self.uses_target else "accepted"])

    def _cascade_step(self, uniforms):
        n = len(uniforms)
        temperature = self.temperature
        x, q_stats, qs = [], [], []
        draft_input = self.last
        for j in range(n):
            logits = self._forward("draft", [draft_input])[-1:]
            q_stat, q = sampling_distribution(logits, temperature)
            draft_input = int(sample_inverse_cdf(q, uniforms[j : j + 1, DRAFT])[0])
            x.append(draft_input)
            q_stats.append(q_stat)
            qs.append(q)
        p_logits = self._forward("target", [self.last] + x[:-1])
        q_stat, q = torch.cat(q_stats), torch.cat(qs)
        p_stat, p = sampling_distribution(p_logits.to(q.dtype), temperature)
        greedy = temperature == 0
        n_kept, correction, accept = verify(self.rule, q_stat, p_stat, q, p, torch.tensor(x, device=q.device),
                                            self.alpha, uniforms, greedy)
        m = n_kept + (correction is not None)
        tokens = x[:n_kept] + ([correction] if correction is not None else [])
        stars = {rule: a.tolist() for rule, a in critical_alphas(
            q_stat[:m], p_stat[:m], q[:m], p[:m], torch.tensor(x[:m], device=q.device), greedy).items()}
        a_star = [{rule: values[i] for rule, values in stars.items()} for i in range(m)]
        records = position_records(self.decoder, self.counters["target_calls"] - 1, x[:m], a_star, q_stat[:m],
                                   p_stat[:m], q[:m], p[:m], accept[:m])
        sources = ["deferred" if self.alpha < rec["a_star"][self.rule] else "accepted" for rec in records[:n_kept]]
        sources += ["replaced"] * (correction is not None)
        # Both caches processed [last, x_0 .. x_{n-2}]; keep [last, x_0 .. x_{m-2}].
        crop(self.target_cache, n - m)
        crop(self.draft_cache, n - m)
        self._emit(records, tokens, sources)

    def _emit(self, records, tokens, sources):
        start = self.position
        for rec, token, source in zip(records, tokens, sources):
            rec.update(token=token, source=source)
            self.trace.positions.append(rec)
            if token in self.eos:
                self.trace.finished, self.trace.stop_reason = True, "eos"
                break
        for rec, text in zip(self.trace.positions[start:], self.decoder.pieces(self.trace.tokens, start)):
            rec["text"] = text
        self.last = self.trace.tokens[-1]
        if not self.trace.finished and self.position >= self.max_new_tokens:
            self.trace.finished, self.trace.stop_reason = True, "max_new_tokens"


def stream(pair, prompt=None, *, rule="v3", alpha=0.3, gamma=4, temperature=1.0, seed=0, max_new_tokens=64,
           chat=True, prompt_ids=None, resume=None, stop_at_eos=True):
    """Generate with a speculative cascade, yielding the growing Trace after every block.

    ``resume=(trace, k)`` continues an earlier trace's prompt from its first k tokens (the UI's re-runs
    after an alpha change): with position-keyed randomness the result equals a fresh run whenever
    those k tokens are what the new setting would emit, which ``Trace.recolour`` establishes."""
    check_rule(rule)
    if resume is not None:
        old, k = resume
        prompt, prompt_ids = old.prompt, list(old.prompt_ids)
        prefix = [dict(pos) for pos in old.positions[:k]]
        for pos in prefix:
            pos["source"] = _source(pos, rule, alpha)
    else:
        prefix = []
        if prompt_ids is None:
            prompt_ids = encode_prompt(pair.tokenizer, prompt, chat)
        prompt_ids = list(prompt_ids)
    check_settings(pair, prompt_ids, rule, alpha, gamma, temperature, max_new_tokens)
    settings = dict(rule=rule, alpha=alpha, gamma=gamma, temperature=temperature, seed=seed,
                    max_new_tokens=max_new_tokens, chat=chat, pair=pair.name, alpha_range=ALPHA_RANGE[rule])
    trace = Trace(prompt_ids=prompt_ids, settings=settings, prompt=prompt, positions=prefix, resumed_from=len(prefix))
    cascade = Cascade(pair, trace, rule, alpha, gamma, temperature, seed, max_new_tokens, stop_at_eos)
    if prefix and (prefix[-1]["token"] in cascade.eos or len(prefix) >= max_new_tokens):
        trace.finished, trace.stop_reason = True, "eos" if prefix[-1]["token"] in cascade.eos else "max_new_tokens"
        yield trace
        return
    start = time.perf_counter()
    with torch.inference_mode():
        cascade.prefill()
        while not trace.finished:
            cascade.step()
            trace.counters["wall_seconds"] = time.perf_counter() - start
            yield trace


def generate(pair, prompt=None, **kwargs):
    """Run the cascade to the end and return its Trace (see ``stream`` for the arguments)."""
    trace = None
    for trace in stream(pair, prompt, **kwargs):
        pass
    return trace
