"""The suite's tiers: what a test needs, decided at collection, and enforced while it runs.

A test carries the marks of what it needs:

``process``
    it starts a local subprocess (an agent, the ``remote-acp`` command, ``ssh``, a shell);
``ssh``
    it needs the lab of real sshd hosts (:mod:`integration.sshlab`) or an sshd of its own;
``runtime``
    it drives a real vendor agent runtime (qwen-code, gemini-cli);
``slow``
    it starts no process but takes seconds, so the fast tier leaves it out;
``timing``
    it asserts how long something took, so the full suite runs it alone, after the parallel part.

``ssh`` and ``runtime`` imply ``process``. A test with none of the first three needs nothing but
the interpreter: ``./scripts/test --fast`` runs those (``-m "not process and not slow"``).

Most marks are not written in the test files: :func:`classify` gives them at collection, from
the directory (everything under ``integration/`` drives real sshd hosts or real runtimes), from
the fixtures a test asks for, and from the table of modules and tests below. A test's own marks
(``pytestmark`` or a decorator) count too.

A test with no ``process`` mark may not start one: :func:`forbid_processes` makes every way of
starting one (``subprocess``, ``os.fork``/``posix_spawn``/``system``, and through them asyncio's,
trio's and anyio's subprocesses) raise :class:`ProcessForbidden`, and the test fails even when the
code under test caught the error. So a test that needs a process and lacks the mark fails loudly,
in every run, instead of silently slowing the fast tier.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Mapping

    import pytest

__all__ = [
    "NEEDS_PROCESS",
    "ProcessForbidden",
    "classify",
    "forbid_processes",
    "longest_first",
    "needs_process",
]

NEEDS_PROCESS = ("process", "ssh", "runtime")
"""The marks that allow a test to start processes (the fast tier leaves them out)."""

ROOT = Path(__file__).resolve().parents[2]

SSH_FIXTURES = frozenset({"ssh_lab", "homes", "lab", "forced_host", "starts_lab"})
"""Fixtures that stand up sshd hosts or throwaway users for them."""

RUNTIME_FIXTURES = frozenset({"qwen_installed", "gemini_installed"})
"""Fixtures that give a real vendor runtime."""

PROCESS_FIXTURES = frozenset({"agent", "cli_agent", "scripted_process"})
"""Fixtures (of ``tests/``) that start a process of their own."""


def needs_process(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(name) is not None for name in NEEDS_PROCESS)


def classify(items: Iterable[pytest.Item], mark: Callable[[str], Any], given: Mapping[str, Collection[str]]) -> None:
    """Give each item the marks of what it needs (see the module docstring).

    ``mark(name)`` makes the marker to add (``getattr(pytest.mark, name)``). ``given`` maps a mark
    to where it applies: module paths from the repository's root (``tests/test_cli.py``: every
    test in it) and node ids without parameters (``tests/test_x.py::test_y``: that test, in each
    of its parametrizations).
    """
    for item in items:
        relative = _relative(item)
        test = f"{relative}::{item.name.split('[', 1)[0]}"
        wanted = {name for name, where in given.items() if relative in where or test in where}
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & SSH_FIXTURES:
            wanted.add("ssh")
        if fixtures & RUNTIME_FIXTURES or item.get_closest_marker("qwen") is not None:
            wanted.add("runtime")
        if fixtures & PROCESS_FIXTURES:
            wanted.add("process")
        own = {m.name for m in item.iter_markers()}
        if relative.startswith("integration/") and not ({"ssh", "runtime"} & (wanted | own)):
            wanted.add("ssh")  # the folder of real sshd hosts and real runtimes
        if {"ssh", "runtime"} & (wanted | own):
            wanted.add("process")
        for name in sorted(wanted - own):
            item.add_marker(mark(name))


class ProcessForbidden(RuntimeError):
    """A test without the ``process`` mark tried to start a process."""


_SPAWNERS: tuple[tuple[Any, str], ...] = (
    (subprocess.Popen, "_execute_child"),
    (os, "fork"),
    (os, "forkpty"),
    (os, "posix_spawn"),
    (os, "posix_spawnp"),
    (os, "system"),
)


def forbid_processes(monkeypatch: pytest.MonkeyPatch, nodeid: str, attempts: list[str]) -> None:
    """Make every way of starting a process raise :class:`ProcessForbidden` until ``monkeypatch``
    is undone; each attempt is also appended to ``attempts`` (the caller fails the test on it,
    whatever the code under test did with the error)."""
    import _posixsubprocess  # the fork+exec under subprocess and multiprocessing

    targets: list[tuple[Any, str]] = [*_SPAWNERS, (_posixsubprocess, "fork_exec")]
    for owner, name in targets:
        if not hasattr(owner, name):
            continue
        what = f"{getattr(owner, '__name__', type(owner).__name__)}.{name}"
        monkeypatch.setattr(owner, name, _refuse(what, nodeid, attempts))


def _refuse(what: str, nodeid: str, attempts: list[str]) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        described = f"{what}{_argv_hint(args)}"
        attempts.append(described)
        raise ProcessForbidden(
            f"{nodeid} started a process ({described}) but is not marked as needing one: mark it "
            "`process` (or `ssh`/`runtime`), in the test or in the tables of the root conftest.py"
        )

    return refuse


def _argv_hint(args: tuple[Any, ...]) -> str:
    for arg in args:
        if isinstance(arg, list | tuple) and arg and all(isinstance(a, str | bytes) for a in arg):
            words = [a.decode(errors="replace") if isinstance(a, bytes) else a for a in arg]
            return f": {' '.join(words)[:160]}"
        if isinstance(arg, str | bytes):
            return f": {arg.decode(errors='replace') if isinstance(arg, bytes) else arg}"[:160]
    return ""


def longest_first(items: list[pytest.Item], longest: Collection[str], workers: int) -> None:
    """Reorder ``items`` in place so that a parallel run starts the ``longest`` tests (module paths
    or node ids without parameters, as for :func:`classify`) first, one share on each worker.

    pytest-xdist's ``worksteal`` scheduler hands each of its ``workers`` an even, contiguous part of
    the list at the start; each part begins here with its share of the longest tests, so no worker
    meets one of them at the end of the run, when the others have nothing left to take over."""
    if workers < 2:
        return

    def is_long(item: pytest.Item) -> bool:
        relative = _relative(item)
        return relative in longest or f"{relative}::{item.name.split('[', 1)[0]}" in longest

    long = [item for item in items if is_long(item)]
    rest = [item for item in items if not is_long(item)]
    ordered: list[pytest.Item] = []
    left = len(items)
    for worker in range(workers):
        size = left // (workers - worker)  # as the scheduler splits what is left
        share = long[worker::workers]
        take = max(0, size - len(share))
        ordered += share + rest[:take]
        del rest[:take]
        left -= size
    items[:] = ordered + rest


def _relative(item: pytest.Item) -> str:
    path = Path(str(item.path)).resolve()
    try:
        return path.relative_to(ROOT).as_posix()
    except ValueError:
        return path.as_posix()
