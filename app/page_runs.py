"""One run per page in Explore: the runs each page (a session) has going, and which of them streams into its view
(a newer run takes it; a regeneration never replaces a run the reader pressed for; Stop ends them)."""
import threading


class Ticket:
    """One run of a page: whether Stop was pressed for it, or a newer run of the page took its view."""

    def __init__(self, page, pressed):
        self.page, self.pressed = page, pressed  # pressed: started by the reader (Run), not by a control's change
        self.stop_asked = self.superseded = self.streaming = False


class PageRuns:
    """The runs each page (a session) has going in Explore; one at a time streams into its view."""

    def __init__(self):
        self._runs, self._lock = {}, threading.Lock()  # page -> its tickets

    def join(self, request, pressed=True):
        ticket = Ticket(getattr(request, "session_hash", None), pressed)
        with self._lock:
            if ticket.page is not None:
                self._runs.setdefault(ticket.page, []).append(ticket)
        return ticket

    def take_view(self, ticket):
        """The ticket's run streams its first tokens: the page's other runs give up the view, unless one streams
        that outranks it (pressed for where this one is not, or as pressed and started after it: then this one gives
        up). A run that only says something ("Nothing changed since the last run") takes nothing from the one
        streaming."""
        with self._lock:
            runs = self._runs.get(ticket.page, [ticket])
            later = runs[runs.index(ticket) + 1:]
            outranks = [other for other in runs if other is not ticket and (
                other.pressed > ticket.pressed or other.pressed == ticket.pressed and other in later)]
            if any(other.streaming for other in outranks):
                ticket.superseded = True
                return
            ticket.streaming = True
            for other in runs:
                other.superseded = other.superseded or (other is not ticket and other not in outranks)

    def finish(self, ticket):
        with self._lock:
            runs = self._runs.get(ticket.page, [])
            if ticket in runs:
                runs.remove(ticket)
            if not runs:
                self._runs.pop(ticket.page, None)

    def stop(self, request):
        """Ask the page's runs to stop; whether one was going."""
        with self._lock:
            runs = self._runs.get(getattr(request, "session_hash", None), [])
            for ticket in runs:
                ticket.stop_asked = True
            return bool(runs)
