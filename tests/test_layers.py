"""The package's layers, read from its own imports (module level, under ``TYPE_CHECKING`` and inside functions
alike, parsed with :mod:`ast`): no import cycle, at most two imports from a lower layer up to a higher one, a
core that imports nothing of the plugin layers nor of pytest, and a package root of at most 16 modules.

A newcomer placing a module: see CONTRIBUTING.md's map; a module of a new subpackage takes its layer from
:data:`LAYERS` (add the subpackage there)."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

PACKAGE = "pytest_xla_dynamo"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE

#: bottom to top: each name is a module or subpackage of the package (its submodules go with it)
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("zoo", "fileio", "versions", "registries")),
    ("core", ("core",)),
    ("settings", ("launch", "options", "activation", "hookspecs", "config", "records", "repro", "markers")),
    ("plugins", ("session", "collection", "workers", "timing", "graphs", "parity", "triage", "known_issues",
                 "gating", "report")),
    ("top", ("plugin", "merge", "__main__", "")),
)
#: what the core may not import, beside the package's layers above it: pytest's plugin machinery
PLUGIN_MACHINERY = ("pytest", "_pytest", "pluggy", "xdist")
MAX_UPWARD = 2
MAX_ROOT_MODULES = 16


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__.py``)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported_names(tree: ast.AST) -> Iterator[tuple[str, tuple[str, ...]]]:
    """``(module, names)`` of every absolute import anywhere in ``tree`` (names: ``()`` for ``import m``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, ()
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, tuple(alias.name for alias in node.names)


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (``from pkg import sub`` counts as importing ``pkg.sub``)."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for module, names in imported_names(ast.parse(path.read_text(), str(path))):
            subs = [f"{module}.{n}" for n in names if f"{module}.{n}" in modules]
            if len(subs) < len(names) or not names:
                subs.append(module)
            targets.update(t for t in subs if t in modules and t != name)
        graph[name] = targets
    return graph


def outside_imports(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module -> the top-level names of what it imports from outside the package."""
    return {name: {module.split(".")[0] for module, _ in imported_names(ast.parse(path.read_text()))
                   if module.split(".")[0] != PACKAGE}
            for name, path in modules.items()}


def layer_of(module: str) -> int:
    rest = module[len(PACKAGE) + 1:] if module != PACKAGE else ""
    best = (-1, -1)  # (length of the matching entry, layer)
    for index, (_, members) in enumerate(LAYERS):
        for member in members:
            if rest == member or (member and rest.startswith(member + ".")):
                best = max(best, (len(member), index))
            elif member == "" and rest == "":
                best = max(best, (0, index))
    if best[1] < 0:
        raise AssertionError(f"{module} has no layer: add it (or its subpackage) to LAYERS in {__file__}")
    return best[1]


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def upward(graph: Mapping[str, set[str]]) -> list[str]:
    return sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets if layer_of(b) > layer_of(a))


GRAPH = import_graph(module_files())


def test_the_graph_is_read() -> None:
    assert f"{PACKAGE}.core.engine" in GRAPH[f"{PACKAGE}.session"]  # under TYPE_CHECKING and in a function
    assert f"{PACKAGE}.core.cases" in GRAPH[f"{PACKAGE}.core.engine"]
    assert f"{PACKAGE}.zoo" in GRAPH[f"{PACKAGE}.core.cases"]  # from pytest_xla_dynamo import zoo


def test_the_check_finds_a_cycle_and_an_upward_import() -> None:
    core, plugin = f"{PACKAGE}.core.engine", f"{PACKAGE}.session"
    assert cycles({core: {plugin}, plugin: {core}}) == [[core, plugin]]
    assert upward({core: {plugin}, plugin: set()}) == [f"{core} -> {plugin}"]


def test_no_import_cycle() -> None:
    assert cycles(GRAPH) == []


def test_every_module_has_a_layer_and_few_imports_run_up() -> None:
    found = upward(GRAPH)
    assert len(found) <= MAX_UPWARD, found


def test_the_core_imports_no_plugin_layer_and_no_pytest() -> None:
    core = layer_of(f"{PACKAGE}.core")
    above = {f"{a} -> {b}" for a, targets in GRAPH.items() if layer_of(a) == core
             for b in targets if layer_of(b) > core}
    assert not above
    machinery = {f"{name} -> {outside}" for name, found in outside_imports(module_files()).items()
                 if layer_of(name) <= core for outside in found & set(PLUGIN_MACHINERY)}
    assert not machinery


def test_the_package_root_holds_few_modules() -> None:
    root = sorted(p.name for p in ROOT.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root
