"""The import picture tells the truth about the architecture: no cycle (type-only and
function-level edges included), no private name taken across modules, the layers in the order
docs/contributing.md gives, and no module too long to hold in one's head."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.import_graph import Edge, ImportGraph, cycles, read_graph

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("remote_acp", "hostinv")
LONGEST_MODULE = 500
LONG_MODULE_TREES = ("remote_acp", "hostinv", "benchmarks", "scripts", "tests", "integration")
# Runs under ``python -I -S`` and imports C modules late on purpose; its docstring says why.
DEFERRED_BY_DESIGN = ("remote_acp.targets.process._supervisor",)


@pytest.fixture(scope="module")
def graph() -> ImportGraph:
    return read_graph(ROOT, PACKAGES)


def private_crossings(graph: ImportGraph) -> list[str]:
    """A ``_name`` belongs to its module, and a ``_module`` to its package (and what is below it)."""
    found: list[str] = []
    for edge in graph.edges:
        found.extend(f"{edge.source}:{edge.line} takes {edge.target}.{name}" for name in _private(edge.names))
        package, _, last = edge.target.rpartition(".")
        if _private((last,)) and not (edge.source + ".").startswith(package + "."):
            found.append(f"{edge.source}:{edge.line} imports {edge.target}")
    return found


def _private(names: tuple[str, ...]) -> list[str]:
    return [name for name in names if name.startswith("_") and not name.startswith("__")]


def test_the_graph_is_read_whole(graph: ImportGraph) -> None:
    # The reader sees every kind of edge; if it saw none of one kind, the checks below would pass
    # vacuously.
    assert len(graph.modules) > 100
    assert any(edge.in_function for edge in graph.edges)
    assert ("remote_acp.session.core", "remote_acp.errors") in {(e.source, e.target) for e in graph.edges}
    assert any(
        e.source == "remote_acp.targets.process.containment" and e.target.endswith("fork_server") for e in graph.edges
    )


def test_no_import_cycle(graph: ImportGraph) -> None:
    assert cycles(graph) == []


def test_no_private_name_crosses_a_module(graph: ImportGraph) -> None:
    assert private_crossings(graph) == []


def test_the_library_never_imports_the_command_line(graph: ImportGraph) -> None:
    offenders = [
        f"{e.source}:{e.line}"
        for e in graph.edges
        if e.target.startswith("remote_acp.cli") and not e.source.startswith("remote_acp.cli")
    ]
    assert offenders == []


def test_hostinv_never_imports_remote_acp(graph: ImportGraph) -> None:
    assert [
        f"{e.source}:{e.line}"
        for e in graph.edges
        if e.source.startswith("hostinv") and e.target.startswith("remote_acp")
    ] == []


def test_the_protocol_core_stands_below_every_other_layer(graph: ImportGraph) -> None:
    above = ("remote_acp.session", "remote_acp.targets", "remote_acp.fleet", "remote_acp.config", "remote_acp.measure")
    offenders = [
        f"{e.source}:{e.line} -> {e.target}"
        for e in graph.edges
        if e.source.startswith("remote_acp.protocol") and e.target.startswith(above)
    ]
    assert offenders == []


def unexplained_deferrals(graph: ImportGraph) -> list[str]:
    """Imports inside functions hide the graph; each is a seam that keeps start-up cheap, and says
    why on its line, on a comment line above its group of imports, or in the docstring of a
    function that exists to import it."""
    found: list[str] = []
    for edge in graph.deferred:
        if edge.source in DEFERRED_BY_DESIGN:
            continue
        lines = graph.modules[edge.source].read_text(encoding="utf-8").splitlines()
        row = edge.line - 1
        while row >= 0 and "#" not in lines[row] and lines[row].strip().startswith(("import ", "from ")):
            row -= 1
        if row < 0 or not ("#" in lines[row] or lines[row].rstrip().endswith('"""')):
            found.append(f"{edge.source}:{edge.line}")
    return found


def test_every_import_inside_a_function_says_why(graph: ImportGraph) -> None:
    assert unexplained_deferrals(graph) == []


def test_no_module_is_longer_than_a_reader_holds_at_once() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for tree in LONG_MODULE_TREES
        for path in sorted((ROOT / tree).rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > LONGEST_MODULE
    }
    assert long == {}


# -- the checks catch what they are for ---------------------------------------------------------


def write_package(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_type_only_cycle_and_a_function_level_cycle_are_cycles(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        {
            "pkg/__init__.py": "from . import a\n",
            "pkg/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n",
            "pkg/b.py": "from .a import A\n",
            "pkg/c.py": "def f():\n    from pkg.d import g\n",
            "pkg/d.py": "from . import c\n",
        },
    )
    found = cycles(read_graph(tmp_path, ("pkg",)))
    assert found == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.d"]]


def test_private_names_and_modules_are_caught_across_modules_only(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/_inner.py": "",
            "pkg/a.py": "from ._inner import thing\nfrom .b import _helper, __version__\n",
            "pkg/b.py": "",
            "pkg/sub/__init__.py": "",
            "pkg/sub/_deep.py": "",
            "other/__init__.py": "",
            "other/x.py": "from pkg import _inner\nfrom pkg.sub._deep import y\n",
        },
    )
    found = private_crossings(read_graph(tmp_path, ("pkg", "other")))
    assert found == [
        "pkg.a:2 takes pkg.b._helper",
        "other.x:1 imports pkg._inner",
        "other.x:2 imports pkg.sub._deep",
    ]


def test_an_import_deferred_without_a_reason_is_caught(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": (
                "def f():\n    import json\n"
                "def g():\n    # the reason\n    import csv\n    import json\n"
                "def h():\n    import json  # the reason\n"
            ),
        },
    )
    assert unexplained_deferrals(read_graph(tmp_path, ("pkg",))) == ["pkg.a:2"]


def test_edges_carry_where_they_were_written(tmp_path: Path) -> None:
    write_package(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "def f():\n    import pkg.b\n", "pkg/b.py": ""})
    assert read_graph(tmp_path, ("pkg",)).edges == [Edge("pkg.a", "pkg.b", (), 2, True)]
