"""The command's import graph: sub-commands load when named (their short help comes from the
table in ``remote_acp.cli.main``), every module of ``remote_acp.cli`` imports what it needs at module
level but at a few seams that say why, without cycles or private names, and what each path loads."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import remote_acp.cli
from remote_acp.cli.main import COMMANDS, cli
from tests.support.startup import modules_after_version

PACKAGE = Path(remote_acp.cli.__file__).parent
MODULES = sorted(PACKAGE.glob("*.py"))
COMMAND_MODULES = {target.partition(":")[0] for target, _ in COMMANDS.values()}


def runtime_imports(path: Path) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """The imports of ``path`` that run (not under ``if TYPE_CHECKING``), each with whether it is
    inside a function."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.append((child, in_function))
            walk(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))

    walk(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def imported_modules(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The absolute names of the modules ``node`` (in a module of ``remote_acp.cli``) imports: for
    ``from .x import y`` ``remote_acp.cli.x``, for ``from . import x`` ``remote_acp.cli.x``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    package = ["remote_acp", "cli"]
    base = package[: len(package) - node.level + 1] if node.level else []
    if node.module is not None:
        return [".".join([*base, node.module])]
    return [".".join([*base, alias.name]) for alias in node.names]


def test_help_lists_each_command_as_its_own_help_says_it() -> None:
    runner = CliRunner()
    listed = runner.invoke(cli, ["--help"])
    assert listed.exit_code == 0, listed.output
    shown = listed.output.split("Commands:\n")[1].splitlines()
    assert [line.split()[0] for line in shown] == sorted(COMMANDS)
    group = click.Context(cli)
    for name in COMMANDS:
        command = cli.get_command(group, name)
        assert command is not None and command.help is not None
        for limit in range(10, 130):
            from_table = click.Command(name, help=COMMANDS[name][1]).get_short_help_str(limit)
            assert from_table == command.get_short_help_str(limit), (name, limit)


def test_an_unknown_command_is_matched_against_every_command() -> None:
    done = CliRunner().invoke(cli, ["chek"])
    assert done.exit_code == 2
    assert "No such command 'chek'. Did you mean 'check'?" in done.output


def test_a_function_level_import_is_a_seam_that_says_why() -> None:
    unsaid = []
    for path in MODULES:
        lines = path.read_text(encoding="utf-8").splitlines()
        for node, in_function in runtime_imports(path):
            if not in_function:
                continue
            above = node.lineno - 2
            while above >= 0 and lines[above].strip().startswith(("from ", "import ")):
                above -= 1  # the imports of one seam share its comment
            comment = []
            while above >= 0 and lines[above].strip().startswith("#"):
                comment.append(lines[above])
                above -= 1
            if not any("# Seam: " in line for line in comment):
                unsaid.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    assert unsaid == []


def test_no_module_imports_a_private_name_or_module() -> None:
    private = [
        f"{path.name}:{node.lineno}: {ast.unparse(node)}"
        for path in MODULES
        for node, _ in runtime_imports(path)
        for name in [
            *(part for module in imported_modules(node) for part in module.split(".")),
            *(alias.name for alias in node.names if isinstance(node, ast.ImportFrom)),
        ]
        if name.startswith("_") and not name.startswith("__")
    ]
    assert private == []


def test_the_modules_import_each_other_without_cycles() -> None:
    graph = {
        f"remote_acp.cli.{path.stem}": {
            module
            for node, _ in runtime_imports(path)
            for module in imported_modules(node)
            if module.startswith("remote_acp.cli.")
        }
        for path in MODULES
    }
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, " -> ".join([*path, module])
        if module in done:
            return
        for imported in sorted(graph.get(module, ())):
            visit(imported, (*path, module))
        done.add(module)

    for module in graph:
        visit(module, ())
    assert COMMAND_MODULES <= set(graph)  # the table names modules that exist


def test_no_module_is_longer_than_500_lines() -> None:
    assert [p.name for p in MODULES if len(p.read_text(encoding="utf-8").splitlines()) > 500] == []


@pytest.mark.process
def test_version_and_help_load_no_command_nor_its_setup() -> None:
    loaded = set(modules_after_version())
    setup = {"remote_acp.cli.logging_setup", "remote_acp.cli.streams", "anyio", "remote_acp.errors"}
    assert sorted((COMMAND_MODULES | setup) & loaded) == []
    probe = (
        "import json, sys, runpy\nsys.argv = ['remote-acp', '--help']\n"
        "try:\n    runpy.run_module('remote_acp.cli.main', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert "Commands:" in done.stdout
    assert sorted((COMMAND_MODULES | setup) & set(json.loads(done.stdout.splitlines()[-1]))) == []


@pytest.mark.process
def test_a_plain_local_run_loads_neither_ssh_nor_the_inventory_nor_a_workflow_file(workspace: str) -> None:
    agent = f"{sys.executable} -m remote_acp.testing.scripted_agent"
    probe = (
        "import json, sys, runpy\n"
        f"sys.argv = ['remote-acp', 'run', '--agent', {agent!r}, '--workspace', {workspace!r}, 'hi']\n"
        "try:\n    runpy.run_module('remote_acp.cli.main', run_name='__main__')\n"
        "except SystemExit as exc:\n    print(json.dumps([exc.code, sorted(sys.modules)]), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    code, loaded = json.loads(done.stderr.splitlines()[-1])
    assert (code, done.stdout) == (0, "hi\n"), done.stderr
    unneeded = (
        "remote_acp.config",
        "remote_acp.fleet",
        "remote_acp.targets.ssh.target",
        "remote_acp.cli.run_remote",
        "remote_acp.cli.placement",
        "hostinv.inventory",
        "pydantic",
        "yaml",
        "rich",
    )
    assert [m for m in loaded if m.startswith(unneeded)] == []
