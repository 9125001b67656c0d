"""State that stays with its page.

Gradio keeps a SessionState per session: a copy of the page's config (about 0.4 MB for this app), the values of its
gr.State components (Explore's run, Compare's rows, ...) and the tabs drawn in it. Its store drops the least
recently used session past a fixed capacity, and every API call is a session of its own: with a capacity of 32, a
burst of 33 API calls wiped every open page (a click on a token did nothing, Re-run had nothing to re-run). Here a
session that holds nothing of its own (an API call's, or a page that has neither run nor drawn anything yet, which
loses nothing) is dropped first, beyond KEPT_EMPTY of them; a page that holds something stays until it is closed
(the page's unload event drops it), idle past IDLE_SECONDS, or beyond MAX_PAGES such pages (the longest idle
first). Memory is then bounded by MAX_PAGES pages and KEPT_EMPTY empty sessions.
"""
import datetime

from gradio.state_holder import StateHolder

KEPT_EMPTY = 16
IDLE_SECONDS = 6 * 3600
MAX_PAGES = 200


class PageSessions(StateHolder):
    """Gradio's session store with the eviction above (``update`` runs whenever a session is used)."""

    def holds_something(self, session):
        return bool(session.state_data) or len(session.blocks_config.blocks) > len(self.blocks.default_config.blocks)

    def update(self, session_id):
        with self.lock:
            if session_id in self.session_data:
                self.session_data.move_to_end(session_id)  # least recently used first
            now = datetime.datetime.now()
            pages, empty = [], []
            for key, session in self.session_data.items():
                (pages if self.holds_something(session) else empty).append(key)
            idle = {key for key in pages if key != session_id and
                    (now - self.time_last_used.get(key, now)).total_seconds() > IDLE_SECONDS}
            pages = [key for key in pages if key not in idle]
            for key in [*idle, *pages[: max(0, len(pages) - MAX_PAGES)], *empty[: max(0, len(empty) - KEPT_EMPTY)]]:
                forget(self, key)


def forget(store, session_id):
    """Drop a session from a Gradio session store (this one or Gradio's own)."""
    store.session_data.pop(session_id, None)
    store.time_last_used.pop(session_id, None)


def keep_pages(demo):
    """Give a launched app this store in place of Gradio's (which drops pages past a fixed count)."""
    sessions = PageSessions()
    sessions.set_blocks(demo)  # demo.state_holder
    demo.server_app.state_holder = sessions
    return sessions
