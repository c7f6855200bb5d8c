"""How many sessions may be starting on one host at once, across every target in this process.

sshd drops connections once too many are still in their handshake (``MaxStartups``, by default
``10:30:100``: from ten unauthenticated connections on it refuses 30% of new ones, all of them
from 100), and a refused start reads as ``port_exit``. A scheduler opening fifty sessions on one
host at once would see some of them fail for no reason of their own, so ssh starts wait for a
slot per host: :func:`start_slot` admits at most ``limit`` starts per key, first come first
served, each waiting start by its own limit.

Theory of operation: anyio's primitives belong to the event loop that made them, and one process
may run several loops (one after another, as tests do, or in threads), so the gates live in a
table per loop, keyed by the loop's native token and dropped with it. A gate counts starts in
flight and keeps its waiters in order; a release admits waiters from the front while each one's
own limit allows, so a start with a smaller limit is not overtaken by later ones.
"""

from __future__ import annotations

import weakref
from collections import deque
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ["in_flight", "start_slot"]


class _Gate:
    """The starts in flight for one key on one event loop, and the starts waiting for a slot."""

    def __init__(self) -> None:
        self.running = 0
        self._waiting: deque[tuple[int, anyio.Event]] = deque()

    async def acquire(self, limit: int) -> None:
        if not self._waiting and self.running < limit:
            self.running += 1
            await anyio.lowlevel.cancel_shielded_checkpoint()
            return
        entry = (limit, anyio.Event())
        self._waiting.append(entry)
        try:
            await entry[1].wait()
        except BaseException:
            if entry[1].is_set():
                self.release()  # admitted, then cancelled before it could use the slot
            else:
                self._waiting.remove(entry)
                self._admit()  # it may have held back the starts behind it
            raise

    def release(self) -> None:
        self.running -= 1
        self._admit()

    def _admit(self) -> None:
        while self._waiting and self.running < self._waiting[0][0]:
            _, admitted = self._waiting.popleft()
            self.running += 1
            admitted.set()


_gates: weakref.WeakKeyDictionary[object, dict[str, _Gate]] = weakref.WeakKeyDictionary()


def _loop_gates() -> dict[str, _Gate]:
    loop = anyio.lowlevel.current_token().native_token
    gates = _gates.get(loop)
    if gates is None:
        gates = _gates[loop] = {}
    return gates


@asynccontextmanager
async def start_slot(key: str, limit: int) -> AsyncIterator[None]:
    """Hold one of the ``limit`` start slots of ``key`` (a host) for the body of the block.

    :raises ValueError: for a ``limit`` below 1.
    """
    if limit < 1:
        raise ValueError("a start limit must be at least 1")
    await anyio.lowlevel.checkpoint_if_cancelled()
    # From here to acquire() nothing yields, so the gate cannot be dropped in between.
    gates = _loop_gates()
    gate = gates.get(key)
    if gate is None:
        gate = gates[key] = _Gate()
    await gate.acquire(limit)
    try:
        yield
    finally:
        gate.release()
        if not gate.running:  # no waiters either: an idle gate is not kept
            gates.pop(key, None)


def in_flight(key: str) -> int:
    """How many starts hold a slot of ``key`` on the running event loop."""
    gate = _loop_gates().get(key)
    return gate.running if gate is not None else 0
