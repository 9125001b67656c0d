"""One model and its KV cache over a batch of rows, each row with its own length.

transformers' caches hold one length for every row, but rows of a speculative cascade keep different numbers of
tokens per block. So every call appends the same number of slots to every row: a row with fewer tokens to feed
(or none) gets dummy slots, and a rejection forgets a row's last slots. A forgotten or dummy slot is a hole:
``valid[row, slot]`` is False, no query attends to it (a 4D mask), and each row's tokens get their own positions
(``position_ids`` = the number of valid slots before them), so a row computes what it would alone. The tail that
every row forgot is cropped; when holes pile up the cache is compacted (each row's valid slots gathered, right
aligned). RoPE is applied when a key is written, so moving it keeps it exact. A dummy query attends to itself,
so no query ever attends to nothing (SDPA would give NaN, and NaN values poison a row even where masked).

A batch of one never has holes (everything forgotten is a tail) and calls the model exactly as a solo decoder
does: no mask, no positions. Only it can use a compiled forward with a static cache (see compiled.py).
"""
import functools
import inspect
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields

import torch
from transformers import DynamicCache

from cascade_core.messages import shown
from cascade_core.method.sampling import finite

HOLES_BEFORE_COMPACTING = 0.25  # compact once a quarter of a row's slots (the most-holed row's) are holes
CALLS = ("target_calls", "draft_calls", "target_seconds", "draft_seconds", "prefill_seconds", "wall_seconds")


@dataclass(eq=False)
class Counters(Mapping):
    """A row's calls and clocks (its trace's ``counters``), written only by these methods: each model call
    (CachedModel), the prefill and the blocks (batch_block.py), the rows of other calls beside it (running_batches.py).
    Read as the mapping its trace's JSON holds (``to_dict``): CALLS always, the rest once started (an engine clock, a
    non-empty list, other calls' rows), as the dict they replace did, so every reader reads the same keys."""

    target_calls: int = 0
    draft_calls: int = 0
    target_seconds: float = 0.0
    draft_seconds: float = 0.0
    prefill_seconds: float = 0.0
    wall_seconds: float = 0.0  # from its prefill to its last block's end, a reader's pauses included
    engine_seconds: float | None = None  # its prefill and blocks: the engine's own clock
    timeline: list = field(default_factory=list)  # [kind, start, end] of each model call, since it joined
    gammas: list = field(default_factory=list)  # each verified block's gamma (gamma "auto": its choices)
    drafted: list = field(default_factory=list)  # the tokens the draft proposed in each of those blocks
    rows_of_other_calls: int = 0  # the most rows of other calls that took a block beside it

    @classmethod
    def of(cls, data):
        """Counters from a trace's JSON, or one sentence naming a key that is none of them."""
        names = [f.name for f in fields(cls)]
        for key in data:
            if key not in names:
                raise ValueError(f"counters: {shown(key)} is not a counter; known: {', '.join(names)}")
        return cls(**{key: list(value) if isinstance(value, list) else value for key, value in data.items()})

    def to_dict(self):
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name in CALLS or getattr(self, f.name)}

    def __getitem__(self, key):
        return self.to_dict()[key]

    def __iter__(self):
        return iter(self.to_dict())

    def __len__(self):
        return len(self.to_dict())

    def called(self, role, seconds):
        """One call of the ``role`` ("target" or "draft") model that fed the row (a batched forward: one per row)."""
        if role == "target":
            self.target_calls, self.target_seconds = self.target_calls + 1, self.target_seconds + seconds
        else:
            self.draft_calls, self.draft_seconds = self.draft_calls + 1, self.draft_seconds + seconds

    def log(self, kind, start, end):
        self.timeline.append([kind, start, end])

    def prefilled(self, seconds):
        self.prefill_seconds = self.engine_seconds = seconds

    def stepped(self, seconds):
        """A block took ``seconds`` of the engine's clock."""
        self.engine_seconds = (self.engine_seconds or 0.0) + seconds

    def settled(self, wall):
        """Its block is settled ``wall`` seconds after its prefill began."""
        self.wall_seconds = wall

    def verified(self, gamma, drafted):
        self.gammas.append(gamma)
        self.drafted.append(drafted)

    def beside(self, others):
        self.rows_of_other_calls = max(self.rows_of_other_calls, others)

    def state(self):
        """Its values, its lists by length (they only grow), to undo a block (``restore``)."""
        return {f.name: len(v) if isinstance(v := getattr(self, f.name), list) else v for f in fields(self)}

    def restore(self, state):
        for name, value in state.items():
            if isinstance(getattr(self, name), list):
                del getattr(self, name)[value:]
            else:
                setattr(self, name, value)


@functools.cache
def cache_argument(model_class):
    """transformers renamed forward's ``past_key_values`` to ``cache`` (5.2x); older 5.x silently ignores ``cache=``."""
    return "cache" if "cache" in inspect.signature(model_class.forward).parameters else "past_key_values"


def forward(model, cache, ids, vocab_size, logits_to_keep=0, call=None, attention_mask=None, position_ids=None,
            inputs=None, feature_layers=()):
    """Logits ``[rows, len(ids[0]) or logits_to_keep, vocab_size]`` for rows of ids appended to the cache, and the
    features ``[rows, len(ids[0]), F]`` of every slot: with ``feature_layers``, the residual streams entering
    those layers side by side (what a head reads); else the model's own (a head's output h), or None.
    ``call`` replaces the model's own forward (a compiled one); ``inputs``: more keyword inputs (a head's g)."""
    input_ids = torch.tensor(ids, device=model.device)
    extra = {} if attention_mask is None else dict(attention_mask=attention_mask, position_ids=position_ids)
    if feature_layers:
        extra["output_hidden_states"] = True  # hidden_states[i]: the stream entering layer i (0: the embeddings)
    out = (call or model)(input_ids=input_ids, use_cache=True, logits_to_keep=logits_to_keep, **extra,
                          **(inputs or {}), **{cache_argument(type(model)): cache})
    features = (torch.cat([out.hidden_states[i] for i in feature_layers], -1) if feature_layers
                else getattr(out, "features", None))
    # contiguous once here: a linear layer's output over few tokens can come laid out vocabulary-major (strides (1, n)
    # for the bundled target), and every softmax, max and top-k over it would otherwise copy it again
    return out.logits[:, :, :vocab_size].contiguous(), features


def hole_mask(valid, width, dtype):
    """The additive 4D mask ``[rows, 1, width, slots]`` for ``width`` new slots at the end of ``valid``: a query
    sees the valid slots up to itself, and itself."""
    slots = valid.shape[1]
    query = torch.arange(slots - width, slots, device=valid.device)[:, None]
    key = torch.arange(slots, device=valid.device)[None, :]
    seen = (valid[:, None, :] & (key <= query)) | (key == query)
    blocked = torch.finfo(dtype).min
    return torch.zeros(seen.shape, dtype=dtype, device=valid.device).masked_fill_(~seen, blocked)[:, None]


def sliding_window(model, cache=None):
    """Whether the model (its ``cache``, by default a fresh one) attends through a sliding window, which batches of
    rows do not mask yet."""
    cache = DynamicCache(config=model.config) if cache is None else cache
    return any(getattr(layer, "is_sliding", False) for layer in cache.layers)


class CachedModel:
    """One model (``role``: "target" or "draft") with its KV cache over ``len(counters)`` rows. Every call is counted
    and timed in the Counters of each row it feeds (a batched forward is one call for every row in it): the timings
    give the measured cost ratio c. ``pending[row]``: tokens the model reads on the row's next call before its input
    (those a sequential cascade emitted without this model; the kept positions a head re-reads with the target's
    features). ``features[row]``: the features of the slots the last call (or prefill) fed for the row, where the
    model hands any over (``feature_layers``: the target's streams a head reads; a head: its output h)."""

    def __init__(self, model, role, vocab_size, counters, compiled=None, cache_length=0, block=1, feature_layers=()):
        self.model, self.role, self.vocab_size, self.counters = model, role, vocab_size, list(counters)
        self.compiled, self.block, self.feature_layers = compiled, block, tuple(feature_layers)
        self.features = [None] * len(self.counters)
        self.cache = compiled.cache(cache_length) if compiled else DynamicCache(config=model.config)
        if len(self.counters) > 1 and sliding_window(model, self.cache):
            raise ValueError(f"{model.config.name_or_path or 'this model'} uses sliding-window attention, which "
                             "batches do not mask yet; run its rows one at a time")
        self.valid = torch.zeros(len(self.counters), 0, dtype=torch.bool, device=model.device)
        self.pending = [[] for _ in self.counters]
        # each row's timeline counts from when it joined (a running batch outlives its first rows)
        self.origins = [time.perf_counter()] * len(self.counters)
        self.seconds = 0.0  # in calls so far (the batch's engine overhead is a block's time beyond them)

    @property
    def rows(self):
        return len(self.counters)

    def _log(self, kind, start, rows):
        """[role or 'role prefill', start, end] in seconds since the generation began: each row's timeline."""
        end = time.perf_counter()
        for r in rows:
            self.counters[r].log(kind, start - self.origins[r], end - self.origins[r])

    def prefill(self, sequences, inputs=None):
        """Read each row's sequence (possibly empty; ``inputs[row]``: its more keyword inputs, per slot). A row's
        prefill runs alone, as it would solo (rows with the same sequence and no more inputs share it); a batch's
        rows are then left-padded with holes into one cache. Returns, per row, None or the error its logits raised."""
        start, errors = time.perf_counter(), [None] * self.rows
        inputs = inputs or [None] * self.rows
        keys = [tuple(s) if inputs[r] is None else r for r, s in enumerate(sequences)]
        if self.rows == 1:
            caches = {keys[0]: self.cache}
        else:
            caches = {key: DynamicCache(config=self.model.config) for key in keys}
        for key, cache in caches.items():
            r = keys.index(key)
            if sequences[r]:
                try:
                    extra = {k: v[None] for k, v in inputs[r].items()} if inputs[r] else None
                    logits, features = forward(self.model, cache, [list(sequences[r])], self.vocab_size,
                                               logits_to_keep=1, inputs=extra, feature_layers=self.feature_layers)
                    finite(logits, self.model)
                    for row in (i for i, k in enumerate(keys) if k == key):
                        self.features[row] = None if features is None else features[0]
                except ValueError as error:
                    errors = [error if k == key else e for k, e in zip(keys, errors)]
        width = max(map(len, sequences))
        self.valid = torch.tensor([[i >= width - len(s) for i in range(width)] for s in sequences],
                                  dtype=torch.bool, device=self.model.device).reshape(self.rows, width)
        if self.rows > 1 and width:
            self._stack([caches[key] for key in keys], width)
        self._log(f"{self.role} prefill", start, [r for r, s in enumerate(sequences) if s])
        return errors

    def _stack(self, caches, width):
        """Fill the batch's cache with each row's own cache, left-padded to ``width`` slots (a row that read nothing:
        all holes)."""
        read = next(cache for cache in caches if cache.get_seq_length())
        for index, layer in enumerate(read.layers):
            own = [cache.layers[index] if cache.get_seq_length() else None for cache in caches]
            keys, values = (torch.cat([_left_padded(getattr(o, name) if o else None, 1, width, getattr(layer, name))
                                       for o in own]) for name in ("keys", "values"))
            self.cache.update(keys, values, index)

    def __call__(self, inputs, extra=None):
        """Append each row's ids (an empty list: the row sits this call out); ``extra[row]``: more keyword inputs
        for its slots (``{name: [len(ids), F]}``; dummy slots get zeros). Returns, per row, the logits
        ``[len(ids), V]`` of its ids (None for rows that sat out)."""
        start = time.perf_counter()
        feeds = [self.pending[r] + ids if ids else [] for r, ids in enumerate(inputs)]
        self.pending = [[] if ids else pending for ids, pending in zip(inputs, self.pending)]
        width = max(map(len, feeds))
        if width == 0:
            return [None] * self.rows
        compiled = self.compiled is not None and width <= self.block
        width = self.block if compiled else width  # a compiled forward has one shape: pad to it
        new = torch.tensor([[i < len(f) for i in range(width)] for f in feeds], device=self.valid.device)
        ids = [f + [f[-1] if f else 0] * (width - len(f)) for f in feeds]  # a dummy's id is never seen
        mask = positions = None
        if not self.valid.all():  # dummies at the tail need no mask yet: nothing real comes after them in a row
            mask = hole_mask(torch.cat([self.valid, new], 1), width, self.model.dtype)
            positions = self.valid.sum(1, keepdim=True) + torch.arange(width, device=new.device)
        logits, features = forward(self.model, self.cache, ids, self.vocab_size,
                                   call=self.compiled.forward if compiled else None, attention_mask=mask,
                                   position_ids=positions, inputs=_padded_inputs(extra, width),
                                   feature_layers=self.feature_layers)
        self.features = [None if features is None or not f else features[r, : len(f)] for r, f in enumerate(feeds)]
        self.valid = torch.cat([self.valid, new], 1)
        self._crop_forgotten_tail()  # a compiled call's padding, at once: the static cache's next write goes there
        fed, seconds = [r for r, ids in enumerate(inputs) if ids], time.perf_counter() - start
        self.seconds += seconds
        for r in fed:
            self.counters[r].called(self.role, seconds)
        self._log(self.role, start, fed)
        return [logits[r, len(f) - len(inputs[r]): len(f)] if inputs[r] else None for r, f in enumerate(feeds)]

    def catch_up(self, row, drafted, emitted):
        """A draft's step 4: of the ``drafted`` tokens it read this block, those past the emitted ones go."""
        if drafted:
            self.forget(row, drafted - len(emitted))

    def forget(self, row, n_tokens):
        """Forget the row's last n tokens (a rejection's): they become holes until cropped or compacted."""
        if n_tokens:
            slots = self.valid[row].nonzero().squeeze(-1)
            self.valid[row, slots[-n_tokens:]] = False

    def _crop_forgotten_tail(self):
        seen = self.valid.any(0).nonzero()
        tail = self.valid.shape[1] - (int(seen[-1]) + 1 if len(seen) else 0)
        if tail:
            self.cache.crop(-tail)  # transformers 5: a negative argument removes that many tokens
            self.valid = self.valid[:, : self.valid.shape[1] - tail]

    def settle(self):
        """After a block: crop the tail every row forgot; compact when holes pile up."""
        self._crop_forgotten_tail()
        holes = int((~self.valid).sum(1).max()) if self.valid.numel() else 0
        if holes > HOLES_BEFORE_COMPACTING * self.valid.shape[1]:
            self._compact()

    def _compact(self):
        """Gather every row's valid slots, right aligned after left-padding holes."""
        counts = self.valid.sum(1)
        width = int(counts.max())
        index = torch.zeros(self.rows, width, dtype=torch.long, device=self.valid.device)
        for r in range(self.rows):
            index[r, width - int(counts[r]):] = self.valid[r].nonzero().squeeze(-1)
        for layer in self.cache.layers:
            if layer.keys is None or not layer.keys.numel():
                continue
            gather = index[:, None, :, None].expand(-1, layer.keys.shape[1], -1, layer.keys.shape[3])
            layer.keys, layer.values = layer.keys.gather(2, gather), layer.values.gather(2, gather)
        self.valid = torch.arange(width, device=counts.device)[None, :] >= (width - counts)[:, None]

    def join(self, sequences, counters, inputs=None):
        """Add rows to the batch between blocks: each is prefilled alone (as ``prefill``), then both sets of rows are
        left-padded with holes to one width. Returns, per new row, None or its prefill's error; ``features`` then
        holds the new rows' only."""
        if self.compiled:
            raise ValueError("the compiled static-cache path decodes one row at a time; rows cannot join it")
        newcomers = CachedModel(self.model, self.role, self.vocab_size, counters, feature_layers=self.feature_layers)
        errors = newcomers.prefill(sequences, inputs)
        self.features = newcomers.features
        width = max(self.valid.shape[1], newcomers.valid.shape[1])
        for layer, other in zip(self.cache.layers, newcomers.cache.layers):
            for name in ("keys", "values"):
                mine, theirs = getattr(layer, name), getattr(other, name)
                like = (mine if mine is not None and mine.numel() else theirs)
                if like is None or not like.numel():  # neither set of rows has read anything yet
                    layer.keys = layer.values = None
                    layer.is_initialized = False  # the next update starts it with every row
                    break
                padded = [_left_padded(t, rows, width, like)
                          for t, rows in ((mine, self.rows), (theirs, len(counters)))]
                setattr(layer, name, torch.cat(padded))
                layer.device, layer.is_initialized = like.device, True
        self.valid = torch.cat([_left_padded(v, v.shape[0], width, v) for v in (self.valid, newcomers.valid)])
        self.pending += newcomers.pending
        self.counters += newcomers.counters
        self.origins += newcomers.origins
        return errors

    def state(self):
        """Its rows' state, to undo a call that failed part-way (``restore``): the cache's layers are kept by
        reference, since a dynamic cache only ever replaces its tensors (and a static one writes past its length);
        ``valid`` is copied, since ``forget`` writes it in place."""
        return (self.cache, [dict(vars(layer)) for layer in self.cache.layers], self.valid.clone(),
                [list(p) for p in self.pending], list(self.counters), list(self.features), list(self.origins),
                self.seconds)

    def restore(self, state):
        self.cache, layers, valid, pending, counters, features, origins, self.seconds = state
        for layer, saved in zip(self.cache.layers, layers):
            vars(layer).clear()
            vars(layer).update(saved)
        self.valid, self.pending = valid.clone(), [list(p) for p in pending]
        self.counters, self.features, self.origins = list(counters), list(features), list(origins)

    def keep_rows(self, rows):
        """Only the given rows go on (the others finished)."""
        if rows == list(range(self.rows)):
            return
        if not rows:  # every row finished: rows that join later start a fresh cache
            self.cache, self.valid = DynamicCache(config=self.model.config), self.valid[:0, :0]
            self.pending, self.counters, self.features, self.origins = [], [], [], []
            return
        self.cache.batch_select_indices(torch.tensor(rows, dtype=torch.long, device=self.valid.device))
        self.valid = self.valid[rows]
        self.pending = [self.pending[r] for r in rows]
        self.counters = [self.counters[r] for r in rows]
        self.origins = [self.origins[r] for r in rows]
        self.features = [self.features[r] if r < len(self.features) else None for r in rows]
        self._crop_forgotten_tail()


def _padded_inputs(extra, width):
    """Per-row keyword inputs ``{name: [n, F]}`` (None: a row without them) as ``{name: [rows, width, F]}``, each row's
    slots first and zeros after (dummies); None when no row has any."""
    if not extra or all(e is None for e in extra):
        return None
    padded = {}
    for name in {name for e in extra if e for name in e}:
        like = next(e[name] for e in extra if e and name in e)
        out = like.new_zeros(len(extra), width, like.shape[-1])
        for r, e in enumerate(extra):
            if e and name in e:
                out[r, : len(e[name])] = e[name]
        padded[name] = out
    return padded


def _left_padded(t, rows, width, like):
    """t (``[rows, ..., slots, ...]``: slots at dim 2 of K/V, dim 1 of a valid mask) left-padded with zeros (holes) to
    ``width`` slots; None or empty: all zeros, shaped like ``like``."""
    dim = 2 if like.dim() == 4 else 1
    if t is None or not t.numel():
        shape = list(like.shape)
        shape[0], shape[dim] = rows, width
        return like.new_zeros(shape)
    pad = list(t.shape)
    pad[dim] = width - t.shape[dim]
    return torch.cat([t.new_zeros(pad), t], dim)
