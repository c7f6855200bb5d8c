"""The documentation's examples stay true: every Python block compiles and imports only what
exists; every ``remote-acp`` command line names a real command and only options it takes."""

from __future__ import annotations

import ast
import importlib
import re
import shlex
from pathlib import Path

import click
import pytest

from remote_acp.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def blocks(language: str) -> list[tuple[str, str]]:
    return [
        (f"{doc.relative_to(ROOT)}", match[2])
        for doc in DOCS
        for match in FENCE.finditer(doc.read_text(encoding="utf-8"))
        if match[1] == language
    ]


@pytest.mark.parametrize(("doc", "code"), blocks("python"))
def test_a_python_example_compiles_and_imports_what_exists(doc: str, code: str) -> None:
    tree = ast.parse(code, filename=doc)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in {"remote_acp", "hostinv"}:
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name), f"{doc}: {node.module} has no {alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in {"remote_acp", "hostinv"}:
                    importlib.import_module(alias.name)


def command_lines() -> list[tuple[str, list[str]]]:
    found = []
    for doc, text in blocks("sh"):
        joined = text.replace("\\\n", " ")
        for line in joined.splitlines():
            line = line.split(" #", 1)[0].strip()
            if line.startswith("remote-acp "):
                found.append((doc, shlex.split(line)[1:]))
    return found


def _command(words: list[str]) -> tuple[click.Command, list[str]]:
    command: click.Command = cli
    while isinstance(command, click.Group) and words and not words[0].startswith("-"):
        sub = command.get_command(click.Context(command), words[0])
        assert sub is not None, f"no command {words[0]!r}"
        command, words = sub, words[1:]
    return command, words


@pytest.mark.parametrize(("doc", "words"), command_lines())
def test_a_command_line_names_a_real_command_and_its_options(doc: str, words: list[str]) -> None:
    command, rest = _command(words)
    known = {name for param in command.params for name in (*param.opts, *param.secondary_opts)}
    known |= {"--help"}
    for word in rest:
        if word.startswith("--"):
            assert word.split("=", 1)[0] in known, f"{doc}: {' '.join(words)}: {command.name} takes no {word}"


def test_there_are_examples_to_check() -> None:
    assert len(blocks("python")) >= 3 and len(command_lines()) >= 10
