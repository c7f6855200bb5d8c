"""Waiting on processes the tests started, and reading who their parent is (``/proc``).

Every wait here has a deadline and fails saying what it waited for: a test orders its steps on
what it can observe (a line on a pipe, a file appearing, a process gone), never on a sleep.
"""

from __future__ import annotations

import os
import select
import time
from typing import IO, TYPE_CHECKING

import anyio

from tests.support.orphans import alive

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from pathlib import Path

__all__ = ["all_gone", "gone_within", "read_line", "supervisor_of", "wait_for", "wait_for_file"]


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


def supervisor_of(pid: int) -> int:
    """The parent of ``pid``."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        raw = f.read()
    return int(raw[raw.rindex(b")") + 2 :].split()[1])
