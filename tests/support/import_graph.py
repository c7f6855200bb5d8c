"""The packages' import graph read from source, every edge counted: module level, inside
functions and under ``if TYPE_CHECKING:``. A type-only edge is still an edge a reader has to
follow, so a cycle through one is a cycle."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["Edge", "ImportGraph", "cycles", "read_graph"]


@dataclass(frozen=True, slots=True)
class Edge:
    source: str
    target: str
    names: tuple[str, ...]  # the names taken from ``target`` (empty for ``import target``)
    line: int
    in_function: bool


@dataclass(slots=True)
class ImportGraph:
    modules: dict[str, Path] = field(default_factory=dict)
    packages: set[str] = field(default_factory=set)
    edges: list[Edge] = field(default_factory=list)
    deferred: list[Edge] = field(default_factory=list)  # every import statement inside a function

    def targets(self, source: str) -> set[str]:
        return {edge.target for edge in self.edges if edge.source == source}


def read_graph(root: Path, packages: tuple[str, ...]) -> ImportGraph:
    graph = ImportGraph()
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
                graph.packages.add(".".join(parts))
            graph.modules[".".join(parts)] = path
    for name, path in graph.modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        _visit(graph, name, tree, in_function=False)
    return graph


def _visit(graph: ImportGraph, module: str, node: ast.AST, *, in_function: bool) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            graph.edges.extend(_edges(graph, module, child, in_function))
            if in_function:
                written = (
                    child.names[0].name if isinstance(child, ast.Import) else "." * child.level + (child.module or "")
                )
                graph.deferred.append(Edge(module, written, (), child.lineno, True))
        else:
            nested = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            _visit(graph, module, child, in_function=nested)


def _edges(graph: ImportGraph, module: str, node: ast.Import | ast.ImportFrom, in_function: bool) -> list[Edge]:
    if isinstance(node, ast.Import):
        return [
            Edge(module, alias.name, (), node.lineno, in_function)
            for alias in node.names
            if alias.name in graph.modules
        ]
    if node.level:
        base = module.split(".") if module in graph.packages else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        source = ".".join([*base, node.module] if node.module else base)
    else:
        source = node.module or ""
    found: list[Edge] = []
    for alias in node.names:
        submodule = f"{source}.{alias.name}"
        if submodule in graph.modules:  # ``from package import module``
            found.append(Edge(module, submodule, (), node.lineno, in_function))
        elif source in graph.modules:
            found.append(Edge(module, source, (alias.name,), node.lineno, in_function))
    return found


def cycles(graph: ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan). A package's ``__init__``
    importing its own submodules, or a submodule its own package, is how packages are built and
    not counted; an ``__init__`` that needs a submodule that needs the ``__init__`` back is
    still caught through any third module."""

    def counted(edge: Edge) -> bool:
        inside = edge.target.startswith(edge.source + ".") or edge.source.startswith(edge.target + ".")
        return edge.source != edge.target and not (
            inside and (edge.source in graph.packages or edge.target in graph.packages)
        )

    successors: dict[str, set[str]] = {name: set() for name in graph.modules}
    for edge in graph.edges:
        if counted(edge):
            successors[edge.source].add(edge.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(successors[node]):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for name in sorted(graph.modules):
        if name not in index:
            connect(name)
    return found
