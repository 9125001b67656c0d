"""Benchmark reports are sections of docs/benchmarks.md, each replaced in place when its benchmark runs again."""
from pathlib import Path


def write_section(path, text, key):
    """Replace the section whose title starts with key where it stands (or add it at the end), keeping the others."""
    path = Path(path)
    old = path.read_text() if path.exists() else "# Benchmarks\n\n"
    head, *sections = old.split("\n## ")
    mine = [i for i, sec in enumerate(sections) if ("## " + sec).startswith(key)]
    place = mine[0] if mine else len(sections)
    kept = [sec for i, sec in enumerate(sections) if i not in mine]
    kept.insert(place, text[3:])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n## ".join([head.rstrip("\n") + "\n"] + kept))
