"""Finding processes through ``/proc`` (Linux; elsewhere every scan finds nothing).

With containment (see :mod:`.containment`) every descendant of the agent stays in the
supervisor's tree, and these scans are the fallback for when it is not in force (no subreaper,
or the supervisor was killed) and the check that a holder of our pipes is ours. A process group
covers the agent and the children that stay in it. Two kinds escape it: a child that called
``setsid`` (or ``setpgid``) and a descendant that keeps our stdout pipe open after the agent
exited. They are found by walking parent links, by the session's mark in their environment
(inherited by every descendant unless it scrubbed its environment), and by asking which
processes hold the agent's ends of our pipes. Each found process is remembered with its start
time, so a recycled pid is never signalled.

Every scan reads all of ``/proc`` (tens of milliseconds with a few hundred processes): callers
on an event loop run them in a worker thread.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = [
    "ProcessRef",
    "alive",
    "boot_id",
    "carries",
    "descendants",
    "has_ancestor",
    "is_running",
    "marked",
    "pipe_holders",
    "process_ref",
    "signal_refs",
]

_PROC = "/proc"


@dataclass(frozen=True, slots=True)
class ProcessRef:
    pid: int
    start_time: int


def _stat(pid: int) -> tuple[int, int] | None:
    """(ppid, start time) of a live process, or None when it is gone or a zombie."""
    try:
        with open(f"{_PROC}/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rindex(b")") + 2 :].split()
    if fields[0] in (b"Z", b"X"):
        return None
    return int(fields[1]), int(fields[19])


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is not)."""
    return _stat(pid) is not None


def boot_id() -> str | None:
    """This boot of this machine's kernel, as it names it: a start time counts from the boot, so a
    process remembered elsewhere or before a reboot is told by it. ``None`` when it cannot say."""
    try:
        with open(f"{_PROC}/sys/kernel/random/boot_id", encoding="ascii") as f:
            text = f.read(64).strip()
    except (OSError, ValueError):
        return None
    return text or None


def process_ref(pid: int) -> ProcessRef | None:
    """``pid`` with its start time, to be told from a later process given the same pid; ``None``
    when it is gone (or ``/proc`` cannot say)."""
    stat = _stat(pid)
    return None if stat is None else ProcessRef(pid, stat[1])


def is_running(ref: ProcessRef) -> bool:
    """Whether the remembered process is still alive (the same pid and start time)."""
    stat = _stat(ref.pid)
    return stat is not None and stat[1] == ref.start_time


def has_ancestor(pid: int, root: int) -> bool:
    """Whether ``root`` is among the parents of ``pid``, up to init."""
    seen = 0
    while pid > 1 and seen < 4096:  # a bound, in case a parent chain changes under us
        stat = _stat(pid)
        if stat is None:
            return False
        pid = stat[0]
        if pid == root:
            return True
        seen += 1
    return False


def carries(pid: int, entry: str) -> bool:
    """Whether the environment of ``pid`` holds ``entry`` (``NAME=value``) exactly."""
    try:
        with open(f"{_PROC}/{pid}/environ", "rb") as f:
            environ = f.read()
    except OSError:
        return False
    return entry.encode() in environ.split(b"\0")


def _pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir(_PROC) if name.isdigit()]
    except OSError:
        return []


def descendants(root: int) -> list[ProcessRef]:
    """Every live descendant of ``root`` (not ``root`` itself), found through parent links."""
    children: dict[int, list[ProcessRef]] = {}
    for pid in _pids():
        stat = _stat(pid)
        if stat is not None:
            children.setdefault(stat[0], []).append(ProcessRef(pid, stat[1]))
    found: list[ProcessRef] = []
    frontier = [root]
    while frontier:
        for ref in children.get(frontier.pop(), ()):
            found.append(ref)
            frontier.append(ref.pid)
    return found


def pipe_holders(ends: dict[int, int]) -> list[ProcessRef]:
    """Live processes other than ours holding one of the pipe ends: ``ends`` maps a pipe's inode
    to the access mode (``os.O_RDONLY`` or ``os.O_WRONLY``) of the end we are looking for."""
    if not ends:
        return []
    wanted = {f"pipe:[{inode}]": mode for inode, mode in ends.items()}
    me = os.getpid()
    found: list[ProcessRef] = []
    for pid in _pids():
        if pid == me:
            continue
        fd_dir = f"{_PROC}/{pid}/fd"
        try:
            names = os.listdir(fd_dir)
        except OSError:
            continue
        for name in names:
            try:
                target = os.readlink(f"{fd_dir}/{name}")
            except OSError:
                continue
            if target in wanted and _access_mode(pid, name) == wanted[target]:
                stat = _stat(pid)
                if stat is not None:
                    found.append(ProcessRef(pid, stat[1]))
                break
    return found


def _access_mode(pid: int, fd: str) -> int | None:
    try:
        with open(f"{_PROC}/{pid}/fdinfo/{fd}") as f:
            for line in f:
                if line.startswith("flags:"):
                    return int(line.split()[1], 8) & os.O_ACCMODE
    except (OSError, ValueError, IndexError):
        pass
    return None


def marked(entry: str) -> list[ProcessRef]:
    """Live processes whose environment holds ``entry`` (``NAME=value``) exactly."""
    needle = entry.encode()
    me = os.getpid()
    found: list[ProcessRef] = []
    for pid in _pids():
        if pid == me:
            continue
        try:
            with open(f"{_PROC}/{pid}/environ", "rb") as f:
                environ = f.read()
        except OSError:
            continue
        if needle in environ and needle in environ.split(b"\0"):
            stat = _stat(pid)
            if stat is not None:
                found.append(ProcessRef(pid, stat[1]))
    return found


def signal_refs(refs: list[ProcessRef], sig: int) -> None:
    """Signal each process that is still the one remembered (same pid and start time)."""
    for ref in refs:
        stat = _stat(ref.pid)
        if stat is None or stat[1] != ref.start_time:
            continue
        try:
            os.kill(ref.pid, sig)
        except OSError:
            pass
