"""What the tests know of processes: read from ``/proc`` (Linux), and waited on with deadlines.

The one walk of ``/proc`` in the tests is :func:`pids`; :func:`processes` filters it (by command
line, environment, owner, parent). It is independent of the library's own scans
(:mod:`remote_acp.targets.process.tree`) on purpose: the tests use it to check what those scans
found and killed, and a check sharing the code it checks would share its mistakes (the ssh lab's
plumbing, which only finds and kills what a host's sshd serves, uses the library's). Every reader
of one process answers for a process that is gone too (empty, ``None`` or ``False``), since a
process may end between the walk and the read.

Every wait here has a deadline and fails saying what it waited for: a test orders its steps on
what it can observe (a line on a pipe, a file appearing, a process gone), never on a sleep.
"""

from __future__ import annotations

import os
import select
import time
from typing import IO, TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from pathlib import Path

__all__ = [
    "all_gone",
    "alive",
    "children_of",
    "cmdline",
    "environ",
    "gone_within",
    "marked",
    "parent_of",
    "pids",
    "processes",
    "read_line",
    "status",
    "supervisor_of",
    "wait_for",
    "wait_for_file",
]


# -- one process ----------------------------------------------------------------------------------


def _read(pid: int | str, what: str) -> bytes | None:
    try:
        with open(f"/proc/{pid}/{what}", "rb") as f:
            return f.read()
    except OSError:
        return None


def _state_and_parent(pid: int | str) -> tuple[bytes, int] | None:
    """The state letter and parent of ``pid`` (``stat``, read after the command name, which may
    hold anything, parentheses and spaces included), or ``None`` when it is gone."""
    raw = _read(pid, "stat")
    if not raw:
        return None
    state, ppid = raw[raw.rindex(b")") + 2 :].split()[:2]
    return state, int(ppid)


def alive(pid: int | str) -> bool:
    """Whether the process exists and is not a zombie (zombies count as dead)."""
    found = _state_and_parent(pid)
    return found is not None and found[0] not in (b"Z", b"X")


def parent_of(pid: int | str) -> int | None:
    """The parent of ``pid``, or ``None`` when it is gone."""
    found = _state_and_parent(pid)
    return None if found is None else found[1]


def supervisor_of(pid: int) -> int:
    """The parent of ``pid``, which must exist (a local agent's parent is its supervisor)."""
    parent = parent_of(pid)
    assert parent is not None, f"process {pid} is gone"
    return parent


def cmdline(pid: int | str) -> bytes:
    """The argv of ``pid``, NUL-separated as the kernel keeps it (empty when it is gone)."""
    return _read(pid, "cmdline") or b""


def environ(pid: int | str) -> dict[str, str]:
    """The environment ``pid`` was started with, as the kernel keeps it (empty when it is gone);
    undecodable bytes as :data:`os.environ` holds them."""
    pairs = (entry.partition(b"=") for entry in (_read(pid, "environ") or b"").split(b"\0") if entry)
    return {os.fsdecode(name): os.fsdecode(value) for name, _, value in pairs}


def status(pid: int | str) -> dict[str, str]:
    """The fields of ``/proc/PID/status`` (``Uid``, ``State``, ``NSpgid``...), values stripped
    (empty when it is gone)."""
    text = (_read(pid, "status") or b"").decode(errors="replace")
    return {name: value.strip() for name, sep, value in (line.partition(":") for line in text.splitlines()) if sep}


# -- every process --------------------------------------------------------------------------------


def pids() -> list[int]:
    """Every process listed in ``/proc`` now, this one and zombies included: the walk."""
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def processes(where: Callable[[int], bool] = lambda pid: True) -> list[int]:
    """The live processes (zombies are not) other than this one for which ``where(pid)`` holds."""
    me = os.getpid()
    return [pid for pid in pids() if pid != me and where(pid) and alive(pid)]


def children_of(pid: int) -> list[int]:
    """The live children of ``pid``."""
    return processes(lambda child: parent_of(child) == pid)


def marked(entry: str) -> list[int]:
    """The live processes other than this one whose environment holds ``entry`` (``NAME=value``)."""
    needle = entry.encode()
    return processes(lambda pid: needle in (_read(pid, "environ") or b"").split(b"\0"))


# -- waiting --------------------------------------------------------------------------------------


async def gone_within(pids: list[int], seconds: float) -> bool:
    """Whether every one of ``pids`` is gone (zombies count as gone) within ``seconds``."""
    deadline = time.monotonic() + seconds
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        await anyio.sleep(0.05)
    return True


def all_gone(pids: Iterable[int], *, within: float) -> bool:
    """Whether every one of ``pids`` is gone (zombies count as gone) within ``within`` seconds:
    :func:`gone_within` for a test that is not async."""
    deadline = time.monotonic() + within
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def wait_for(condition: Callable[[], object], what: str, *, within: float = 10.0) -> None:
    """Wait until ``condition()`` is true (something observable that has no event of its own);
    after ``within`` seconds, fail naming ``what`` was waited for."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {within} s for {what}")
        time.sleep(0.02)


def wait_for_file(path: Path, *, within: float = 10.0) -> None:
    """Wait until ``path`` exists, failing after ``within`` seconds."""
    wait_for(path.exists, f"{path} to appear", within=within)


def read_line(stream: IO[bytes] | IO[str], *, within: float, what: str = "a line") -> bytes:
    """The next line of a pipe (without its newline), within ``within`` seconds.

    Read from the descriptor a byte at a time, so nothing past the line is taken: the stream's
    own reads (``communicate()``) still see everything after it, as long as only this function
    read from it before.

    :raises TimeoutError: no whole line came in time.
    :raises EOFError: the pipe closed first (what came is in the message).
    """
    fd = stream.fileno()
    deadline = time.monotonic() + within
    line = bytearray()
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            raise TimeoutError(f"waited {within} s for {what}; got {bytes(line)!r}")
        byte = os.read(fd, 1)
        if not byte:
            raise EOFError(f"the pipe closed before {what}; got {bytes(line)!r}")
        if byte == b"\n":
            return bytes(line)
        line += byte
