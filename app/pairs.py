"""Which model pairs the app offers, and loading each once (cached between requests), with progress."""
import gc
import queue
import threading
from collections import OrderedDict

from cascade_core import load_pair
from cascade_core.formats.loading import BUNDLED, KNOWN_DRAFTS, TINY, normalised, offline_draft, parse_pair, with_draft
from cascade_core.messages import shown

SEED_PAIR = "Qwen/Qwen3-0.6B -> Qwen/Qwen3-1.7B"
CHOICES = [
    ("bundled: SmolLM2-135M-Instruct, a distilled 4-layer draft or an EAGLE-3 head (offline)", BUNDLED),
    ("Qwen/Qwen3-0.6B -> Qwen/Qwen3-1.7B (hub)", SEED_PAIR),
    ("tiny random pair (mechanics only)", TINY),
]
# The draft beside the pair: the pair's own draft model, or an EAGLE-3 head (the bundled one; a hub target's known
# published head); beside a hub target, any draft model's or head's folder or id typed in (not in public mode).
DRAFT_CHOICES = [("draft model (runs alone)", "model"), ("EAGLE-3 head (reads the target's hidden states)", "head")]
# Public mode (a Space) loads only these hub ids: arbitrary ids would let visitors make the Space download
# anything. trust_remote_code is never set, in any mode.
PUBLIC_MODEL_IDS = frozenset({
    "Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B", "Qwen/Qwen3-4B",
    "HuggingFaceTB/SmolLM2-135M-Instruct", "HuggingFaceTB/SmolLM2-360M-Instruct", "HuggingFaceTB/SmolLM2-1.7B-Instruct",
    *(draft for drafts in KNOWN_DRAFTS.values() for draft in drafts.values()),
})


def drafts_with_a_head(spec, draft=None):
    """Whether the pair ``spec`` with ``draft`` chosen beside it (models.with_draft) drafts with an EAGLE-3 head:
    an offline pair's "head", or a known published head; a head's id typed in is found out on loading."""
    ids = parse_pair(with_draft(spec, draft))
    if "name" in ids:
        return offline_draft(ids["name"], ids.get("draft")) == "head"
    return ids["draft"] in {drafts["head"] for drafts in KNOWN_DRAFTS.values()}


def pair_default_draft(spec):
    """The draft a pair runs with unless one is chosen: the bundled pair's measured faster one (models.py), and
    beside a hub target with a known published head, the head (one layer a call instead of a whole model: on a
    GPU's launch-bound clock about 1/28 of the target's forward)."""
    ids = parse_pair(spec)
    if "name" in ids:
        return offline_draft(ids["name"], ids.get("draft"))
    return "head" if "head" in KNOWN_DRAFTS.get(ids["target"], {}) else "model"


def check_public(spec):
    """In public mode only allow-listed hub ids (and the offline pairs) may be loaded."""
    ids = parse_pair(spec)
    if "name" in ids:  # the offline pairs, with either of their drafts
        return
    refused = [ids[k] for k in ("draft", "target") if ids[k] not in PUBLIC_MODEL_IDS]
    if refused:
        raise ValueError(f"this public app only loads these models: {', '.join(sorted(PUBLIC_MODEL_IDS))}; "
                         f"not {', '.join(map(shown, refused))}")


class PairCache:
    """Loaded pairs by normalised spec, at most ``max_pairs`` of them: loading another frees the least recently
    used one (and says so). A pair is loaded once; concurrent requests for it wait for that one load."""

    def __init__(self, public=False, loader=load_pair, max_pairs=2):
        self.public = public
        self.loader = loader
        self.max_pairs = max_pairs
        self._pairs = OrderedDict()  # least recently used first
        self._locks = {}
        self._guard = threading.Lock()

    def loaded(self, spec):
        return normalised(spec) in self._pairs

    def peek(self, spec):
        """The pair if it is loaded, else None, at once (never loading it, nor waiting for a load under way)."""
        return self._pairs.get(normalised(spec))

    def _lock(self, key):
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def get(self, spec, progress=None):
        if self.public:
            check_public(spec)
        key = normalised(spec)
        with self._lock(key):
            if key not in self._pairs:
                pair = self.loader(**parse_pair(key), progress=progress)
                with self._guard:
                    self._pairs[key] = pair
                    self._evict(progress)
            with self._guard:
                self._pairs.move_to_end(key)
                return self._pairs[key]

    def _evict(self, progress):
        while len(self._pairs) > self.max_pairs:
            old, _ = self._pairs.popitem(last=False)
            gc.collect()  # the models' tensors go now, not at some later collection
            if progress:
                progress(f"Freed model pair {old} (at most {self.max_pairs} pairs stay loaded; the least recently "
                         "used goes first).")

    def load_with_progress(self, spec):
        """Generator: yields the loader's progress messages while it loads in a thread; returns the pair
        (use ``pair = yield from cache.load_with_progress(spec)``). Errors are re-raised here."""
        if self.loaded(spec):
            return self.get(spec)
        messages, outcome = queue.Queue(), {}

        def work():
            try:
                outcome["pair"] = self.get(spec, progress=messages.put)
            except Exception as error:  # handed to the request that asked; the server keeps serving
                outcome["error"] = error

        worker = threading.Thread(target=work, daemon=True)
        worker.start()
        yield f"Loading model pair {normalised(spec)} (once; later runs reuse it)…"
        while worker.is_alive() or not messages.empty():
            try:
                yield messages.get(timeout=0.2)
            except queue.Empty:
                pass
        if "error" in outcome:
            raise outcome["error"]
        return outcome["pair"]
