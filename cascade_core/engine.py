"""The speculative-cascade loop: the draft proposes, the target verifies in one pass, a rule decides.

Invariant: both KV caches hold every token of the sequence except the last one, ``last``, which is the next
input of both models. A block feeds ``[last, x_0 .. x_{n-2}]`` through the draft (one token at a time, sampling
x_0 .. x_{n-1}) and through the target (one pass), so both see the same inputs, and after a rejection at
position j both caches are cropped back to ``[.., last, x_0 .. x_{j-1}]``.
"""
import functools
import inspect
import time

import torch
from transformers import DynamicCache

from .rules import RULES, Distributions, get_rule
from .sampling import DRAFT, position_uniforms, sample_inverse_cdf, untempered_and_tempered, verify
from .settings import check_prompt, check_settings
from .trace import Block, Detokenizer, Trace, source_under

def encode_prompt(tokenizer, prompt, chat=True):
    """Token ids for a prompt, through the chat template when the tokenizer has one and chat is on."""
    check_prompt(prompt)
    if chat and getattr(tokenizer, "chat_template", None):
        # enable_thinking=False keeps Qwen3's answers short; templates without the variable ignore it.
        ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                            tokenize=True, enable_thinking=False, return_dict=False)
        return list(ids)
    return tokenizer(prompt, add_special_tokens=True)["input_ids"]


@functools.cache
def cache_argument(model_class):
    """transformers renamed forward's ``past_key_values`` to ``cache`` (5.2x); older 5.x silently ignores ``cache=``."""
    return "cache" if "cache" in inspect.signature(model_class.forward).parameters else "past_key_values"


def forward(model, cache, ids, vocab_size, logits_to_keep=0, call=None):
    """Logits [len(ids) or logits_to_keep, vocab_size] for ids appended to the cache, checked for NaN/inf.
    ``call`` replaces the model's own forward (a compiled one)."""
    input_ids = torch.tensor([ids], device=model.device)
    logits = (call or model)(input_ids=input_ids, use_cache=True, logits_to_keep=logits_to_keep,
                             **{cache_argument(type(model)): cache}).logits[0, :, :vocab_size]
    if not torch.isfinite(logits).all():
        raise ValueError(f"{model.config.name_or_path or 'a model'} produced NaN or inf logits; "
                         "the weights or the dtype are broken for this input")
    return logits


class CachedModel:
    """One model with its KV cache. Every call is counted and timed: the timings give the measured cost ratio c.
    With a compiled forward (see compiled.py) the cache is static and every call has ``block`` tokens: a shorter
    one is padded, and the padding's cache entries rewound."""

    def __init__(self, model, role, vocab_size, counters, compiled=None, cache_length=0, block=1):
        self.model, self.role, self.vocab_size, self.counters = model, role, vocab_size, counters
        self.compiled, self.block = compiled, block
        self.cache = compiled.cache(cache_length) if compiled else DynamicCache(config=model.config)
        self.unseen = []  # tokens a sequential cascade emitted without this model; it reads them on its next call
        self.origin = time.perf_counter()

    def _log(self, kind, start):
        """[role or 'role prefill', start, end] in seconds since the generation began: the run's timeline."""
        end = time.perf_counter()
        self.counters.setdefault("timeline", []).append([kind, start - self.origin, end - self.origin])

    def prefill(self, ids):
        start = time.perf_counter()
        forward(self.model, self.cache, ids, self.vocab_size, logits_to_keep=1)
        self._log(f"{self.role} prefill", start)

    def __call__(self, ids):
        start, requested = time.perf_counter(), len(ids)
        ids, self.unseen = self.unseen + ids, []
        if self.compiled is None or len(ids) > self.block:
            logits = forward(self.model, self.cache, ids, self.vocab_size)  # its NaN check waits for CUDA: real time
        else:
            pad = self.block - len(ids)
            logits = forward(self.model, self.cache, ids + ids[-1:] * pad, self.vocab_size,
                             call=self.compiled.forward)[: len(ids)]
            self.crop(pad)
        self.counters[f"{self.role}_seconds"] += time.perf_counter() - start
        self.counters[f"{self.role}_calls"] += 1
        self._log(self.role, start)
        return logits[-requested:]

    def crop(self, n_tokens):
        if n_tokens:
            self.cache.crop(-n_tokens)  # transformers 5: a negative argument removes that many tokens


class Decoding:
    """The state of one generation: the settings, both cached models, the last token, the trace being built."""

    def __init__(self, pair, trace, rule, alpha, gamma, temperature, seed, max_new_tokens, stop_at_eos, sequential):
        self.trace, self.rule, self.alpha, self.gamma, self.sequential = trace, rule, alpha, gamma, sequential
        self.temperature, self.seed, self.max_new_tokens = temperature, seed, max_new_tokens
        self.eos = pair.eos_token_ids if stop_at_eos else set()
        counters = trace.counters
        counters.update(target_calls=0, draft_calls=0, target_seconds=0.0, draft_seconds=0.0, prefill_seconds=0.0,
                        wall_seconds=0.0)
        compiled = pair.compiled or {}
        length = len(trace.prompt_ids) + max_new_tokens + gamma + 1
        self.target = CachedModel(pair.target, "target", pair.vocab_size, counters, compiled.get("target"), length,
                                  block=1 if rule == "target" or sequential else gamma + 1) if rule != "draft" else None
        self.draft = CachedModel(pair.draft, "draft", pair.vocab_size, counters, compiled.get("draft"),
                                 length) if rule != "target" else None

    def prefill(self):
        start = time.perf_counter()
        sequence = self.trace.prompt_ids + self.trace.tokens
        for model in (self.target, self.draft):
            if model is not None and len(sequence) > 1:
                model.prefill(sequence[:-1])
        self.last = sequence[-1]
        self.trace.counters["prefill_seconds"] = time.perf_counter() - start

    def step(self):
        """One block: gamma + 1 positions (fewer at the end; one for baselines and sequential cascades), with their
        position-keyed uniforms."""
        start = len(self.trace.positions)
        baseline = RULES[self.rule].kind == "baseline"
        n = 1 if baseline or self.sequential else min(self.gamma + 1, self.max_new_tokens - start)
        uniforms = position_uniforms(self.seed, range(start, start + n))
        if baseline:
            block = plain_block(self, uniforms)
        else:
            block = sequential_block(self, uniforms) if self.sequential else cascade_block(self, uniforms)
        self.trace.add_block(block, self.eos, self.max_new_tokens)
        self.last = self.trace.tokens[-1]


def propose(draft, last, uniforms, temperature):
    """The draft samples x_0 .. x_{n-1} autoregressively, x_j from q_j with position j's draft uniform.
    Returns x and q_j (untempered, tempered) stacked ``[n, V]``."""
    x, untempered, tempered = [], [], []
    for u in uniforms[:, DRAFT]:
        q_untempered, q = untempered_and_tempered(draft([x[-1] if x else last])[-1:], temperature)
        x.append(int(sample_inverse_cdf(q, u.reshape(1))[0]))
        untempered.append(q_untempered)
        tempered.append(q)
    return x, torch.cat(untempered), torch.cat(tempered)


def cascade_block(run, uniforms):
    """One block of a speculative cascade (the spec's "One block"):

    1. the draft proposes n = gamma + 1 tokens x_0 .. x_{n-1}, one at a time, from q;
    2. one target pass over [last, x_0 .. x_{n-2}] scores every one of them: p_0 .. p_{n-1};
    3. verify in order against pi = rule(q, p, alpha): keep x_j with probability min(1, pi_j(x_j) / q_j(x_j));
       the first rejection is replaced by a sample of norm(max(0, pi_j - q_j)) and ends the block;
    4. crop both caches back to the emitted prefix;
    5. hand the block to the trace."""
    n = len(uniforms)
    x, q_untempered, q = propose(run.draft, run.last, uniforms, run.temperature)  # 1
    p_untempered, p = untempered_and_tempered(run.target([run.last] + x[:-1]).to(q.dtype), run.temperature)  # 2
    d = Distributions(q, p, q_untempered, p_untempered, greedy=run.temperature == 0)
    verdict = verify(run.rule, d, torch.tensor(x, device=q.device), run.alpha, uniforms)  # 3
    m = verdict.emitted
    run.target.crop(n - m)  # 4: both processed [last, x_0 .. x_{n-2}]; keep [last, x_0 .. x_{m-2}]
    run.draft.crop(n - m)
    tokens = x[: verdict.kept] + ([verdict.correction] if verdict.correction is not None else [])
    return Block(run.trace.counters["target_calls"] - 1, x[:m], tokens, verdict.sources(), d.first(m),  # 5
                 verdict.accept_prob[:m])


def sequential_block(run, uniforms):
    """One position of a token-level sequential cascade, the way a cascade runs without speculation: the draft
    proposes x from q; the target is called for this one position only where the rule needs it (where it defers,
    and, for every rule that reads p, to decide at all). Its randomness is cascade_block's, so its tokens are
    the speculative cascade's; only the cost differs."""
    x, q_untempered, q = propose(run.draft, run.last, uniforms[:1], run.temperature)
    rule = RULES[run.rule]
    if rule.decides_on_q and not bool(rule.defers(Distributions(q, None, q_untempered), run.alpha)):
        run.target.unseen.append(run.last)  # the target reads this position when it is next called
        return Block(run.trace.counters["draft_calls"] - 1, x, x, ["accepted"], Distributions(q, None, q_untempered))
    p_untempered, p = untempered_and_tempered(run.target([run.last]).to(q.dtype), run.temperature)
    d = Distributions(q, p, q_untempered, p_untempered, greedy=run.temperature == 0)
    verdict = verify(run.rule, d, torch.tensor(x, device=q.device), run.alpha, uniforms[:1])
    token = x if verdict.kept else [verdict.correction]
    return Block(run.trace.counters["target_calls"] - 1, x, token, verdict.sources(), d, verdict.accept_prob)


def plain_block(run, uniforms):
    """A baseline: one token sampled from the target (target-only) or the draft (draft-only) alone, with the
    position's draft uniform."""
    model = run.target or run.draft
    untempered, tempered = untempered_and_tempered(model([run.last]), run.temperature)
    token = int(sample_inverse_cdf(tempered, uniforms[:, DRAFT])[0])
    d = Distributions(None, tempered, None, untempered) if run.target else Distributions(tempered, None, untempered)
    source = "deferred" if run.target else "accepted"
    return Block(run.trace.counters[f"{model.role}_calls"] - 1, [token], [token], [source], d)


def stream(pair, prompt=None, *, rule="v3", alpha=0.3, gamma=4, temperature=1.0, seed=0, max_new_tokens=64,
           chat=True, prompt_ids=None, resume=None, stop_at_eos=True, details=True, sequential=False):
    """Generate with a speculative cascade, yielding the growing Trace after every block.

    ``resume=(trace, k)`` continues an earlier trace's prompt from its first k tokens (the app's re-runs after
    an alpha change): with position-keyed randomness the result equals a fresh run whenever those k tokens
    are what the new setting would emit, which ``Trace.recolour`` establishes. ``details=False`` skips the
    per-position records only the explorer reads (a* of every rule, top-10 lists, proposal texts).
    ``sequential=True`` runs the token-level sequential cascade instead (one position at a time, the target only
    where the rule needs it): the same tokens, another cost."""
    get_rule(rule)
    if resume is not None:
        old, k = resume
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
    r = RULES[rule]
    settings = dict(rule=rule, alpha=alpha, gamma=gamma, temperature=temperature, seed=seed, details=details,
                    sequential=sequential,
                    max_new_tokens=max_new_tokens, chat=chat, pair=pair.name, alpha_range=r.alpha_range)
    trace = Trace(prompt_ids=prompt_ids, settings=settings, prompt=prompt, positions=prefix, resumed_from=len(prefix),
                  detokenizer=Detokenizer(pair.tokenizer))
    run = Decoding(pair, trace, rule, alpha, gamma, temperature, seed, max_new_tokens, stop_at_eos, sequential)
    if prefix and (prefix[-1]["token"] in run.eos or len(prefix) >= max_new_tokens):
        trace.finished, trace.stop_reason = True, "eos" if prefix[-1]["token"] in run.eos else "max_new_tokens"
        yield trace
        return trace
    start = time.perf_counter()
    with torch.inference_mode():
        run.prefill()
        while not trace.finished:
            run.step()
            trace.counters["wall_seconds"] = time.perf_counter() - start
            yield trace
    return trace


def finish(steps):
    """Run a generator of steps (``stream``, a sweep's, the strategies') to its end and return what it returns."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def mapped(steps, fn):
    """A generator of steps with every value passed through fn; returns what steps returns."""
    while True:
        try:
            value = next(steps)
        except StopIteration as end:
            return end.value
        yield fn(value)


def generate(pair, prompt=None, **kwargs):
    """Run the cascade to the end and return its Trace (see ``stream`` for the arguments)."""
    return finish(stream(pair, prompt, **kwargs))
