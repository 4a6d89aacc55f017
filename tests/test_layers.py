"""The package's layers, read from its own imports (module level, under ``TYPE_CHECKING`` and inside functions
alike, parsed with :mod:`ast`): no import cycle, neither between modules nor between folders (a subpackage or a
root module: no two of them import each other, however long the loop), at most two imports from a lower layer up
to a higher one (counted file by file), a core that imports nothing of the plugin layers nor of pytest, and a
package root of at most 16 modules. Also
its shape: no function longer than 60 lines, and CONTRIBUTING.md's module map a line per module of the tree.

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
                 "gating", "report", "ops")),
    ("top", ("plugin", "merge", "__main__", "")),
)
#: what the core may not import, beside the package's layers above it: pytest's plugin machinery
PLUGIN_MACHINERY = ("pytest", "_pytest", "pluggy", "xdist")
MAX_UPWARD = 2
MAX_ROOT_MODULES = 16
#: the longest a function may be: from its ``def`` to its last line, docstring included
MAX_FUNCTION_LINES = 60
#: functions allowed to be longer ("module.qualified_name" -> why); none today
LONG_FUNCTIONS: dict[str, str] = {}
CONTRIBUTING = ROOT.parent / "CONTRIBUTING.md"


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


def folder_of(module: str) -> str:
    """The folder a module stands in: its subpackage beneath the package (``timing``), or itself at the root."""
    rest = module[len(PACKAGE) + 1:] if module != PACKAGE else "__init__"
    return rest.split(".", 1)[0]


def folder_graph(graph: Mapping[str, set[str]]) -> dict[str, dict[str, list[str]]]:
    """Folder -> the folders it imports, each with the file imports that tie them (``"a.b -> c.d"``)."""
    folders: dict[str, dict[str, list[str]]] = {folder_of(name): {} for name in graph}
    for a, targets in graph.items():
        for b in sorted(targets):
            if folder_of(a) != folder_of(b):
                folders[folder_of(a)].setdefault(folder_of(b), []).append(f"{a} -> {b}")
    return folders


def folder_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The folder-level loops of ``graph``: each with the file imports that tie it."""
    folders = folder_graph(graph)
    found = []
    for loop in cycles({folder: set(targets) for folder, targets in folders.items()}):
        found.append([edge for a in loop for b, edges in folders[a].items() if b in loop for edge in edges])
    return found


GRAPH = import_graph(module_files())


def test_the_graph_is_read() -> None:
    assert f"{PACKAGE}.core.engine" in GRAPH[f"{PACKAGE}.session"]  # under TYPE_CHECKING and in a function
    assert f"{PACKAGE}.core.cases" in GRAPH[f"{PACKAGE}.core.engine"]
    assert f"{PACKAGE}.zoo" in GRAPH[f"{PACKAGE}.core.cases"]  # from pytest_xla_dynamo import zoo


def test_the_check_finds_a_cycle_and_an_upward_import() -> None:
    core, plugin = f"{PACKAGE}.core.engine", f"{PACKAGE}.session"
    assert cycles({core: {plugin}, plugin: {core}}) == [[core, plugin]]
    assert upward({core: {plugin}, plugin: set()}) == [f"{core} -> {plugin}"]


def test_the_check_finds_a_folder_loop() -> None:
    a, b, c = (f"{PACKAGE}.{name}" for name in ("timing.check", "workers.threads", "timing.threads"))
    assert cycles({a: set(), b: {c}, c: set()}) == []  # no module cycle ...
    loop = {a: {b}, b: {c}, c: set()}
    assert cycles(loop) == [] and folder_cycles(loop) == [[f"{a} -> {b}", f"{b} -> {c}"]]  # ... but a folder loop
    assert folder_graph(loop)["workers"] == {"timing": [f"{b} -> {c}"]}


def test_no_import_cycle() -> None:
    assert cycles(GRAPH) == []


def test_no_two_folders_import_each_other() -> None:
    """No loop between subpackages and root modules: every folder stands above all it imports."""
    assert folder_cycles(GRAPH) == []


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


# --- the package's shape ------------------------------------------------------------------------------


def function_lengths(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """``(qualified name, lines)`` of every function and method in ``tree``, nested ones too."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = f"{prefix}{node.name}"
            if not isinstance(node, ast.ClassDef):
                yield name, (node.end_lineno or node.lineno) - node.lineno + 1
            yield from function_lengths(node, name + ".")
        else:
            yield from function_lengths(node, prefix)


def long_functions(limit: int = MAX_FUNCTION_LINES) -> dict[str, int]:
    """``{"module.function": lines}`` of the package's functions longer than ``limit`` lines."""
    return {f"{module}.{name}": lines for module, path in module_files().items()
            for name, lines in function_lengths(ast.parse(path.read_text(), str(path))) if lines > limit}


def test_the_length_check_finds_a_long_function() -> None:
    body = "".join(f"        x = {i}\n" for i in range(59))
    source = "class A:\n    def short(self):\n        pass\n\n    def long(self):\n" + body + "        return x\n"
    assert dict(function_lengths(ast.parse(source))) == {"A.short": 2, "A.long": 61}


def test_no_function_is_longer_than_60_lines() -> None:
    found = long_functions()
    assert {name: lines for name, lines in found.items() if name not in LONG_FUNCTIONS} == {}
    assert set(LONG_FUNCTIONS) <= set(found), "an exception that is no longer long: take it off LONG_FUNCTIONS"


def contributing_map(text: str) -> set[str]:
    """The package's paths CONTRIBUTING.md's layout block names (``parity/compare.py``, ``parity/``, ...)."""
    block = text.split("```\n" + PACKAGE + "/\n", 1)[1].split("```", 1)[0]
    found: set[str] = set()
    folder = ""
    for line in block.splitlines():
        entry = line.strip().split(" ", 1)[0]
        indent = len(line) - len(line.lstrip())
        if not entry or entry.startswith("#") or indent not in (2, 4) or not (entry.endswith((".py", "/", ".toml"))):
            continue
        if indent == 2:
            folder = entry if entry.endswith("/") else ""
            found.add(entry)
        else:
            found.add(folder + entry)
    return found


def tree_paths() -> set[str]:
    """The package's modules and subpackages as the map names them (a subpackage stands for its ``__init__``)."""
    paths = set()
    for path in ROOT.rglob("*.py"):
        relative = path.relative_to(ROOT).as_posix()
        paths.add(relative.rsplit("/", 1)[0] + "/" if relative.endswith("/__init__.py") else relative)
    return paths


def test_the_module_map_has_a_line_per_module() -> None:
    listed = {p for p in contributing_map(CONTRIBUTING.read_text()) if not p.endswith(".toml")}
    tree = tree_paths()
    assert tree - listed == set(), "modules CONTRIBUTING.md's map does not list"
    assert listed - tree == set(), "lines of CONTRIBUTING.md's map whose module is gone"
