"""The project's shape: the engine imports no tool and no UI, nothing imports in a cycle, and the docs' rules
table is the one the rule records make."""
import ast
from pathlib import Path

from cascade_core.rules import rules_table

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
    for path in (ROOT / "cascade_core").glob("*.py"):
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
    assert graph["cascade_core.models"] >= {"cascade_core.draft"}  # the graph is really read


def test_readme_rules_table_is_the_records():
    assert rules_table() in (ROOT / "README.md").read_text()
    assert "{rules_table}" in (ROOT / "assets" / "how_to_read.md").read_text()
