"""Imports point down the layers of archsql/layers.py, and no two units import each other in
a cycle.  Every module is parsed (no import), function-local imports included."""

from __future__ import annotations

import ast
import itertools
from collections import defaultdict
from pathlib import Path

import archsql
from archsql.layers import LAYERS

PACKAGE = Path(archsql.__file__).parent
ROOT = "archsql"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


MODULES = _modules()
LAYER_OF = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def unit_of(module: str) -> str | None:
    """The LAYERS unit of an archsql module: the longest listed prefix ('' for the root)."""
    if module == ROOT:
        return ""
    parts = module.split(".")[1:]
    for n in range(len(parts), 0, -1):
        unit = ".".join(parts[:n])
        if unit in LAYER_OF:
            return unit
    return None


def layer_of(unit: str) -> int:
    return -1 if unit == "" else LAYER_OF[unit]


def _imports(module: str, path: Path):
    """(line, imported archsql module, the import as written) of every import in the file."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == ROOT or alias.name.startswith(ROOT + "."):
                    yield node.lineno, alias.name, f"import {alias.name}"
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if not (target == ROOT or target.startswith(ROOT + ".")):
                continue
            names = ", ".join(a.name for a in node.names)
            written = f"from {'.' * node.level}{node.module or ''} import {names}"
            # `from archsql.x import y` imports the submodule x.y when there is one
            subs = {f"{target}.{a.name}" for a in node.names}
            for imported in sorted({s if s in MODULES else target for s in subs}):
                yield node.lineno, imported, written


def _where(path: Path, line: int) -> str:
    return f"{path.relative_to(PACKAGE.parent)}:{line}"


def test_every_module_has_a_layer():
    missing = sorted(m for m in MODULES if unit_of(m) is None)
    assert not missing, "modules in no layer of archsql/layers.py: " + ", ".join(missing)


def test_imports_point_down():
    problems = []
    for module, path in MODULES.items():
        unit = unit_of(module)
        if unit is None:
            continue
        for line, target, written in _imports(module, path):
            to = unit_of(target)
            if to is None:
                problems.append(f"{_where(path, line)}: `{written}`: {target} is in no layer")
            elif layer_of(to) > layer_of(unit):
                problems.append(
                    f"{_where(path, line)}: `{written}`: {unit or ROOT} (layer {layer_of(unit)}) imports "
                    f"{to} (layer {layer_of(to)}), a higher layer"
                )
    assert not problems, "imports that point up the layers of archsql/layers.py:\n" + "\n".join(problems)


def _unit_graph() -> dict[str, dict[str, str]]:
    """unit → imported unit → where (the first such import)."""
    graph: dict[str, dict[str, str]] = defaultdict(dict)
    for module, path in MODULES.items():
        unit = unit_of(module)
        for line, target, written in _imports(module, path):
            to = unit_of(target)
            if unit is not None and to is not None and to != unit:
                graph[unit].setdefault(to, f"{_where(path, line)}: `{written}`")
    return graph


def find_cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one unit (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                components.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    cycles = []
    for comp in components:
        members, path, v = set(comp), [], sorted(comp)[0]
        while v not in path:
            path.append(v)
            v = next(w for w in graph[v] if w in members)
        cycles.append([*path[path.index(v) :], v])
    return cycles


def test_no_cycles_between_units():
    graph = _unit_graph()
    lines = []
    for cycle in find_cycles(graph):
        lines.append(" → ".join(cycle))
        lines += [f"    {graph[a][b]}" for a, b in itertools.pairwise(cycle)]
    assert not lines, "units that import each other in a cycle:\n" + "\n".join(lines)


def test_the_checker_itself():
    """The checks themselves: an upward import and a cycle are reported."""
    assert unit_of("archsql.schema.quant") == "schema"
    assert unit_of("archsql.design.cli") == "design.cli"
    assert layer_of("schema") < layer_of("evaluator") < layer_of("cli")
    assert find_cycles({"a": {"b": "x"}, "b": {"a": "y"}}) == [["a", "b", "a"]]
    assert find_cycles({"a": {"b": "x"}, "b": {}}) == []
