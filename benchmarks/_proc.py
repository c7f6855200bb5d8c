"""The benchmarks' one reader of ``/proc`` (Linux): processes by parent, state and command line,
and the memory and descriptors of one process.

The library's own walker (:mod:`remote_acp.targets.process.tree`) skips zombies, which is what a
session's teardown wants; the benchmarks need them (a benchmark process is a child subreaper and
reaps what is re-parented to it), so they read ``/proc`` here. Where ``/proc`` is missing every
scan finds nothing and every figure is 0.
"""

from __future__ import annotations

import contextlib
import os

__all__ = [
    "alive",
    "children",
    "open_fds",
    "parent_of",
    "pids",
    "pss_kib",
    "rss_kib",
    "processes_naming",
    "stat",
    "status_kib",
]

_PROC = "/proc"


def pids() -> list[int]:
    """Every pid in ``/proc``."""
    try:
        return [int(name) for name in os.listdir(_PROC) if name.isdigit()]
    except OSError:
        return []


def stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of ``pid``, zombies included; None when it is gone."""
    try:
        with open(f"{_PROC}/{pid}/stat", "rb") as fh:
            raw = fh.read()
        # "pid (comm) state ppid ...": comm may contain spaces and parentheses
        fields = raw[raw.rindex(b")") + 2 :].split()
        return fields[0].decode(), int(fields[1])
    except (OSError, ValueError, IndexError):
        return None


def children(parent: int | None = None) -> list[tuple[int, str]]:
    """(pid, state) of every direct child of ``parent`` (this process by default), zombies included."""
    parent = os.getpid() if parent is None else parent
    found: list[tuple[int, str]] = []
    for pid in pids():
        entry = stat(pid)
        if entry is not None and entry[1] == parent:
            found.append((pid, entry[0]))
    return found


def alive(pid: int | None) -> bool:
    """Whether ``pid`` is a live process (a zombie is not)."""
    entry = stat(pid) if pid is not None else None
    return entry is not None and entry[0] not in ("Z", "X")


def parent_of(pid: int) -> int:
    """The parent pid of ``pid``, 0 when it is gone."""
    entry = stat(pid)
    return entry[1] if entry is not None else 0


def processes_naming(text: str) -> list[int]:
    """Pids of every process but this one whose command line contains ``text``."""
    me, wanted = os.getpid(), text.encode()
    found: list[int] = []
    for pid in pids():
        if pid == me:
            continue
        with contextlib.suppress(OSError), open(f"{_PROC}/{pid}/cmdline", "rb") as fh:
            if wanted in fh.read():
                found.append(pid)
    return found


def status_kib(pid: int | str, *keys: str) -> dict[str, int]:
    """The ``keys`` (e.g. ``VmRSS``, ``VmHWM``) of ``/proc/<pid>/status``, in KiB; a missing one is left out."""
    return _kib_fields(f"{_PROC}/{pid}/status", keys)


def rss_kib(pid: int | str = "self") -> int:
    """Resident set size (``VmRSS``), 0 when the process is gone."""
    return status_kib(pid, "VmRSS").get("VmRSS", 0)


def pss_kib(pid: int) -> int:
    """Proportional set size: shared pages (the interpreter, libc) counted once across processes."""
    return _kib_fields(f"{_PROC}/{pid}/smaps_rollup", ("Pss",)).get("Pss", 0)


def open_fds() -> int:
    """How many file descriptors this process holds."""
    try:
        return len(os.listdir(f"{_PROC}/self/fd"))
    except OSError:
        return 0


def _kib_fields(path: str, keys: tuple[str, ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    with contextlib.suppress(OSError, ValueError, IndexError), open(path, encoding="ascii") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in keys:
                out[key] = int(value.split()[0])
    return out
