"""Waiting on processes the tests started, and reading who their parent is (``/proc``)."""

from __future__ import annotations

import time

import anyio

from tests.support.orphans import alive

__all__ = ["gone_within", "supervisor_of"]


async def gone_within(pids: list[int], seconds: float) -> bool:
    """Whether every one of ``pids`` is gone (zombies count as gone) within ``seconds``."""
    deadline = time.monotonic() + seconds
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        await anyio.sleep(0.05)
    return True


def supervisor_of(pid: int) -> int:
    """The parent of ``pid``."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        raw = f.read()
    return int(raw[raw.rindex(b")") + 2 :].split()[1])
