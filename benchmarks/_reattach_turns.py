"""The sessions and turns :mod:`benchmarks.reattach` times, and how a lost link is read back.

An undisturbed session: its start (to the ``async with`` body), a one-chunk turn, a turn of many
chunks (``@bulk``) and its close. A disturbed one: a turn dripping numbered chunks
(``@drip``) whose link is lost mid-stream, by a SIGKILL to the local ``ssh`` or by a cut of a
namespaced host's network link, every event stamped as it arrives (``perf_counter``), so the
reconnect and the replay after it are read from the arrival times: when the link was lost and
restored, and when the first event after ``link_restored`` came (by the stream's order, the
first chunk the agent wrote while the link was down).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import anyio
import anyio.to_thread

from remote_acp import LinkLost, LinkRestored, open_session
from tests.support.reattach_host import CHUNK

from ._agents import bulk_prompt
from ._proc import alive, processes_naming

if TYPE_CHECKING:
    from collections.abc import Callable, Collection

    from integration.sshlab import SshHost
    from remote_acp import Event, Session
    from remote_acp.options import SessionOptions
    from remote_acp.targets.launch import LaunchTarget

__all__ = ["WORKSPACE", "Outage", "Undisturbed", "cut_turn", "end_relays", "killed_turn", "undisturbed"]

WORKSPACE: Final = "/tmp"
PROMPT: Final = "hi"
DISTURB_WITHIN_S: Final = 60.0
"""The bound of any wait for an event of a disturbed turn (the turn itself: twice that)."""


def drip_prompt(chunks: int, every_ms: int) -> str:
    """``chunks`` numbered chunks (``chunk-0001 ``...), one every ``every_ms``, and no reply after."""
    return f"@drip={chunks} @drip-ms={every_ms} @chunks=0"


@dataclass(slots=True)
class Clock:
    """A turn's ``on_event``: every event with the moment it arrived, the text deltas counted,
    the drip's chunk numbers in arrival order; ``on_chunk`` is called with each number."""

    on_chunk: Callable[[int], None] | None = None
    events: list[tuple[float, Event]] = field(default_factory=list)
    deltas: int = 0
    chunks: list[int] = field(default_factory=list)

    def __call__(self, event: Event) -> None:
        self.events.append((time.perf_counter(), event))
        delta = getattr(event, "delta", None)
        if delta is None:
            return
        self.deltas += 1
        if (match := CHUNK.fullmatch(delta)) is not None:
            self.chunks.append(int(match[1]))
            if self.on_chunk is not None:
                self.on_chunk(self.chunks[-1])

    async def until(self, condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + DISTURB_WITHIN_S
        while not condition():  # an arrival has no event of its own to wait on
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {DISTURB_WITHIN_S:g} s for {what}")
            await anyio.sleep(0.005)

    def lost(self) -> bool:
        return any(isinstance(event, LinkLost) for _, event in self.events)


@dataclass(frozen=True, slots=True)
class Undisturbed:
    """One session with no disturbance, in seconds."""

    start_s: float
    one_chunk_s: float
    bulk_s: float
    close_s: float
    bulk_cpu: tuple[float, float]
    """CPU seconds of the bulk turn here and on the hosts (NaN where nothing counts them)."""


async def undisturbed(
    target: LaunchTarget,
    options: SessionOptions,
    chunks: int,
    seen: list[str],
    cpu: Callable[[], tuple[float, float]] | None = None,
) -> Undisturbed:
    """Start a session, run a one-chunk turn and a ``chunks``-chunk turn, close it; each timed,
    and the bulk turn's CPU time read from ``cpu`` (seconds here and on the hosts so far). A
    windowed session's relay id goes to ``seen`` as it starts (as in the turns below)."""
    nothing = (math.nan, math.nan)
    counter = Clock()
    t0 = time.perf_counter()
    async with open_session(WORKSPACE, options, target=target) as session:
        t1 = time.perf_counter()
        if session.handle is not None:
            seen.append(session.handle.relay_id)
        one = await session.run_turn(PROMPT)
        before = cpu() if cpu is not None else nothing
        t2 = time.perf_counter()
        bulk = await session.run_turn(bulk_prompt(chunks), counter)
        t3 = time.perf_counter()
        after = cpu() if cpu is not None else nothing
    t4 = time.perf_counter()
    if not one.ok or one.last_message != PROMPT:
        raise RuntimeError(f"the one-chunk turn on {target.label} ended {one.outcome}: {one.message}")
    if not bulk.ok or counter.deltas != chunks:
        raise RuntimeError(f"the bulk turn on {target.label} ended {bulk.outcome} after {counter.deltas} chunks")
    bulk_cpu = (after[0] - before[0], after[1] - before[1])
    return Undisturbed(t1 - t0, t2 - t1, t3 - t2, t4 - t3, bulk_cpu)


@dataclass(frozen=True, slots=True)
class Outage:
    """A lost link as the turn saw it: ``perf_counter`` stamps, and what the events said."""

    broken_at: float
    """The kill, or the start of the cut."""
    back_at: float
    """When a new link could work: the kill itself (the network never left), or the cut's end."""
    lost_at: float
    restored_at: float
    down_ms: int
    """As :class:`~remote_acp.LinkRestored` says: from the loss noticed to the link restored."""
    first_at: float
    """The first event after ``link_restored``: the first chunk written while the link was down."""
    backlog: int
    """Chunks that came in one burst from ``link_restored`` (arrivals closer than half the drip's step)."""
    backlog_s: float
    hold_s: float = 0.0
    """For a cut: how long the link stayed down after the loss was noticed."""

    @property
    def detect_s(self) -> float:
        return self.lost_at - self.broken_at

    @property
    def reconnect_s(self) -> float:
        return self.restored_at - self.lost_at

    @property
    def restored_to_first_s(self) -> float:
        return self.first_at - self.restored_at

    @property
    def back_to_restored_s(self) -> float:
        return self.restored_at - self.back_at

    @property
    def back_to_first_s(self) -> float:
        return self.first_at - self.back_at


def read_outage(clock: Clock, *, broken_at: float, back_at: float, every_ms: int, hold_s: float = 0.0) -> Outage:
    """The one loss and restoration of ``clock``'s turn, checked whole (every chunk once, in order)."""
    if clock.chunks != list(range(1, len(clock.chunks) + 1)):
        raise RuntimeError(f"chunks lost, repeated or out of order: {clock.chunks}")
    lost = [i for i, (_, event) in enumerate(clock.events) if isinstance(event, LinkLost)]
    restored = [i for i, (_, event) in enumerate(clock.events) if isinstance(event, LinkRestored)]
    if len(lost) != 1 or len(restored) != 1:
        raise RuntimeError(f"expected one link_lost and one link_restored, saw {len(lost)} and {len(restored)}")
    restored_at, event = clock.events[restored[0]]
    assert isinstance(event, LinkRestored)
    after = [at for at, later in clock.events[restored[0] + 1 :] if getattr(later, "delta", None) is not None]
    if not after:
        raise RuntimeError("nothing came after link_restored: the agent wrote nothing while the link was down")
    burst, previous = 0, restored_at
    for at in after:
        if at - previous > every_ms / 2000:
            break
        burst, previous = burst + 1, at
    return Outage(
        broken_at=broken_at,
        back_at=back_at,
        lost_at=clock.events[lost[0]][0],
        restored_at=restored_at,
        down_ms=event.down_ms,
        first_at=after[0],
        backlog=burst,
        backlog_s=previous - restored_at,
        hold_s=hold_s,
    )


def _relay_id(session: Session) -> str:
    if session.handle is None:
        raise RuntimeError("the session has no reattach window")
    return session.handle.relay_id


def _is_ssh(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return os.path.basename(fh.read().split(b"\0")[0]) == b"ssh"
    except OSError:
        return False


async def killed_turn(
    target: LaunchTarget, options: SessionOptions, seen: list[str], *, chunks: int, every_ms: int, at: int
) -> Outage:
    """A fresh session's dripping turn whose local ``ssh`` is SIGKILLed as chunk ``at`` arrives."""
    killed: list[float] = []
    async with open_session(WORKSPACE, options, target=target) as session:
        seen.append(_relay_id(session))
        ssh = session.pid  # the first connection's ssh: the current one until a reconnect
        if ssh is None or not _is_ssh(ssh):
            raise RuntimeError(f"the session's process {ssh} is not the local ssh")

        def kill_at(number: int) -> None:
            if number == at:
                os.kill(ssh, signal.SIGKILL)
                killed.append(time.perf_counter())

        clock = Clock(kill_at)
        with anyio.fail_after(2 * DISTURB_WITHIN_S):
            result = await session.run_turn(drip_prompt(chunks, every_ms), clock)
    if not result.ok or len(clock.chunks) != chunks or not killed:
        raise RuntimeError(f"the killed turn ended {result.outcome} with {len(clock.chunks)} of {chunks} chunks")
    return read_outage(clock, broken_at=killed[0], back_at=killed[0], every_ms=every_ms)


async def cut_turn(
    target: LaunchTarget,
    options: SessionOptions,
    seen: list[str],
    host: SshHost,
    *,
    chunks: int,
    every_ms: int,
    at: int,
    hold_s: float,
) -> Outage:
    """A fresh session's dripping turn whose network link is cut as chunk ``at`` arrives, and
    restored ``hold_s`` after the session noticed the loss."""
    clock = Clock()
    marks: dict[str, float] = {}

    async def disturb() -> None:
        await clock.until(lambda: len(clock.chunks) >= at, f"chunk {at}")
        marks["cut"] = time.perf_counter()
        await anyio.to_thread.run_sync(host.cut_link)
        try:
            await clock.until(clock.lost, "link_lost after the cut")
            await anyio.sleep(hold_s)
        finally:
            await anyio.to_thread.run_sync(host.restore_link)
            marks["back"] = time.perf_counter()

    async with open_session(WORKSPACE, options, target=target) as session:
        seen.append(_relay_id(session))
        with anyio.fail_after(2 * DISTURB_WITHIN_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(disturb)
                result = await session.run_turn(drip_prompt(chunks, every_ms), clock)
    if not result.ok or len(clock.chunks) != chunks:
        raise RuntimeError(f"the cut turn ended {result.outcome} with {len(clock.chunks)} of {chunks} chunks")
    return read_outage(clock, broken_at=marks["cut"], back_at=marks["back"], every_ms=every_ms, hold_s=hold_s)


def relays(ids: Collection[str]) -> list[int]:
    """The live processes of the relays of sessions ``ids`` on the hosts (this machine): each
    relay and its subshells run ``sh -c TEXT ra-relay DIR ID ...``."""
    wanted = {relay_id.encode() for relay_id in ids}
    found: list[int] = []
    for pid in processes_naming("ra-relay"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                words = fh.read().split(b"\0")
        except OSError:
            continue
        if b"ra-relay" in words[:4]:
            at = words.index(b"ra-relay")
            if words[at + 2 : at + 3] and words[at + 2] in wanted and alive(pid):
                found.append(pid)
    return found


def end_relays(ids: Collection[str], *, within: float) -> list[int]:
    """Wait up to ``within`` seconds for the relays of sessions ``ids`` to end (a closed session's
    relay ends the agent and removes its directory); SIGKILL and return any still running."""
    deadline = time.monotonic() + within
    while (left := relays(ids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return left
