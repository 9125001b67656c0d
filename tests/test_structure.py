"""The project's shape: the engine imports no tool and no UI, nothing imports in a cycle, and the docs' rules
table is the one the rule records make."""
import ast
import sys
from pathlib import Path

from cascade_core.method.rules import rules_table

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cascade_core", "app", "bench", "distill", "sweeps", "custom_generate")
TOOLS_AND_UI = ("app", "bench", "distill", "sweeps", "tests", "gradio", "plotly", "ray", "playwright")


def module_name(path):
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path):
    """Absolute names of the modules a file imports, relative imports resolved."""
    package = module_name(path).split(".")[: -1 if path.name != "__init__.py" else None]
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            names.add(module)
            names |= {f"{module}.{alias.name}" for alias in node.names}
    return names


def project_graph():
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    modules = {module_name(p): p for p in files}
    return {name: {m for m in imports(path) if m in modules and m != name} for name, path in modules.items()}


def test_cascade_core_imports_no_tool_and_no_ui():
    for path in (ROOT / "cascade_core").rglob("*.py"):
        bad = {m for m in imports(path) if m.split(".")[0] in TOOLS_AND_UI}
        assert not bad, f"{path.name} imports {bad}"


def test_no_import_cycles():
    graph = project_graph()
    state = {}

    def visit(node, stack):
        state[node] = "open"
        for nxt in graph[node]:
            assert state.get(nxt) != "open", f"import cycle: {' -> '.join(stack + [node, nxt])}"
            if nxt not in state:
                visit(nxt, stack + [node])
        state[node] = "done"

    for node in graph:
        if node not in state:
            visit(node, [])
    assert graph["cascade_core.formats.loading"] >= {"cascade_core.formats.shipped_draft"}  # the graph is really read


def test_readme_rules_table_is_the_records():
    assert rules_table() in (ROOT / "README.md").read_text()
    assert "{rules_table}" in (ROOT / "assets" / "how_to_read.md").read_text()


# -- The layers: the method a reader of the paper needs in one folder, the engine around it ------------------------

PACKAGE = ROOT / "cascade_core"
LAYERS = ("method", "decoding", "speed", "formats", "tools")
TOP_LEVEL = {"__init__", "__main__", "messages", "strict_json", "reference"}


def within(name, *packages):
    return any(name == p or name.startswith(p + ".") for p in packages)


def engine_imports(path):
    """The names under cascade_core a file imports (``from cascade_core.x import y``: cascade_core.x and .x.y)."""
    return {m for m in imports(path) if within(m, "cascade_core")}


def test_every_module_sits_in_a_layer_under_a_name_of_its_own():
    """A new module names its layer; no two share a name (the Hub export flattens the modules it needs by name)."""
    top = {p.stem for p in PACKAGE.glob("*.py")}
    assert top <= TOP_LEVEL, f"put {sorted(top - TOP_LEVEL)} in one of cascade_core's layers, {LAYERS}"
    assert {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"} == set(LAYERS)
    names = [p.stem for p in PACKAGE.rglob("*.py") if p.stem != "__init__"]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})


def test_the_method_reads_nothing_of_the_engine_but_the_messages():
    """method/ (the rules, the distributions, sampling, one row's decision, the costs, the explanations) imports
    nothing of cascade_core but itself and cascade_core.messages, and nothing beyond the standard library but torch
    and numpy: it reads numbers, never a model or a cache. reference.py, the method as one naive loop, reads the
    method alone."""
    for path in [*(PACKAGE / "method").rglob("*.py"), PACKAGE / "reference.py"]:
        bad = {m for m in engine_imports(path) if not within(m, "cascade_core.method", "cascade_core.messages")}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"
        outside = {m.split(".")[0] for m in imports(path)} - set(sys.stdlib_module_names)
        assert outside <= {"cascade_core", "torch", "numpy"}, f"{path.relative_to(ROOT)} imports {sorted(outside)}"


def test_speed_changes_no_token():
    """speed/ (the measured prices, the CPU's product kernels, the compiled path) imports no module of the method
    (no rule, no draw, no decision), of the formats or of the tools: it times and routes a model's calls and chooses
    no token."""
    for path in (PACKAGE / "speed").rglob("*.py"):
        bad = {m for m in engine_imports(path)
               if within(m, "cascade_core.method", "cascade_core.formats", "cascade_core.tools")}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_only_main_imports_a_tool():
    """tools/ (the command line, the Hub export) is imported by nothing in cascade_core but __main__.py."""
    for path in PACKAGE.rglob("*.py"):
        if path.parent.name != "tools" and path.name != "__main__.py":
            bad = {m for m in engine_imports(path) if within(m, "cascade_core.tools")}
            assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_the_app_drives_no_cache_draft_or_block():
    """app/ asks cascade_core for runs, traces, prices and checks; it never reaches the machinery of a block."""
    machinery = [f"cascade_core.{m}" for m in ("decoding.cached_model", "decoding.proposals", "decoding.model_draft",
                                               "decoding.head_draft", "decoding.draft_protocol", "method.decision",
                                               "speed.kernels", "speed.compiled", "tools")]
    for path in [ROOT / "app.py", *(ROOT / "app").rglob("*.py")]:
        bad = {m for m in engine_imports(path) if within(m, *machinery)}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"
