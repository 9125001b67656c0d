"""The last few /run results, so that /block after /run with the same settings replays one block from the run's
trace (cascade_core/decoding/replay.py's ``resumed_row``) instead of decoding the run again up to it: the inspector's
step-through, called block by block over the API, then costs a block a call, and a block past the run's end is
refused at once.

A run is known by everything that makes it: the prompt, the pair (with its draft) and every setting its trace
records, the pair's precision among them (``RunSettings.recorded``), all but ``reproducible``, which changes only
whom it decodes beside (a replay decodes alone). The cache holds the trace's JSON text, as /run sent it, for the
last RECENT_RUNS runs (a 1024-token run's is about 2 MB), and parses one back only when a replay asks for it."""
import threading
from collections import OrderedDict

from cascade_core import Trace
from cascade_core.strict_json import dumps

RECENT_RUNS = 8


def run_key(s, pair):
    """What makes the run of ``s`` (AppSettings) on ``pair``, as one string."""
    recorded = {name: value for name, value in s.for_pair(pair).recorded(pair).items() if name != "reproducible"}
    return dumps([s.pair_spec, s.prompt, recorded])


class RecentRuns:
    def __init__(self, size=RECENT_RUNS):
        self.size, self._runs, self._lock = size, OrderedDict(), threading.Lock()

    def remembering(self, s, pair, messages):
        """``messages`` (an API call's (finished, JSON text), as streaming.progress_messages makes them) passed on,
        the finished run's text kept under its key."""
        key = run_key(s, pair)
        for finished, text in messages:
            if finished:
                with self._lock:
                    self._runs[key] = text
                    self._runs.move_to_end(key)
                    while len(self._runs) > self.size:
                        self._runs.popitem(last=False)
            yield finished, text

    def find(self, s, pair):
        """The Trace of a recent run of ``s`` on ``pair``, or None."""
        with self._lock:
            text = self._runs.get(run_key(s, pair))
        return None if text is None else Trace.from_json(text)
