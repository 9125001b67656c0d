"""A sweep's folder: ``sweep.json`` (its settings), ``rows.jsonl`` (rows appended chain by chain as they finish),
and the reports. Rerunning the same sweep into the same folder skips every finished chain, so an interrupted
sweep loses no finished row and ends with the rows an uninterrupted one would have."""
import json
import os
from pathlib import Path

from cascade_core.strict_json import dumps


class SweepFolder:
    def __init__(self, folder, settings):
        self.folder = Path(folder)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            probe = self.folder / ".writable"
            probe.write_text("")
            probe.unlink()
        except OSError as error:
            raise ValueError(f"--out {str(folder)!r} is not a folder this sweep can write to: "
                             f"{error.strerror}") from None
        self.rows_path = self.folder / "rows.jsonl"
        settings_path = self.folder / "sweep.json"
        if settings_path.exists() and json.loads(settings_path.read_text()) != json.loads(dumps(settings)):
            raise ValueError(f"{settings_path} holds a sweep with other settings; use another --out folder or remove "
                             "that one")
        settings_path.write_text(dumps(settings, indent=1) + "\n")

    def finished_rows(self):
        """Rows already written; a last line cut short by an interruption is dropped (its chain runs again)."""
        if not self.rows_path.exists():
            return []
        rows = []
        for line in self.rows_path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                break
        self.rewrite(rows)
        return rows

    def rewrite(self, rows):
        self.rows_path.write_text("".join(dumps(r) + "\n" for r in rows))

    def append(self, rows):
        """One chain's rows, written in one go and flushed to disk before the next chain's."""
        with open(self.rows_path, "a") as f:
            f.write("".join(dumps(r) + "\n" for r in rows))
            f.flush()
            os.fsync(f.fileno())
