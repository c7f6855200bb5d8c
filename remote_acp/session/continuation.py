"""Continuing a saved session: ``session/load`` or ``session/resume``, confirmed, else a new one.

The route follows what the handshake advertised, in a fixed order: ``session/load`` when
``loadSession`` is true, else ``session/resume`` when ``sessionCapabilities.resume`` is present,
else no continuation. Before either call, one request to a vendor method of ours that no
protocol release can claim records the runtime's "not implemented" code (the negative
control), so the log can tell an unimplemented continuation from a broken one.

A resume confirms itself by answering. A load is confirmed only by at least one replayed
message chunk for that session, seen before its answer or within ``read_timeout_ms`` after
it: runtimes answer success while replaying nothing. Any error, timeout or unconfirmed load
lowers the session-continuation capability and falls back to ``session/new`` within the same
start; a lost connection fails the start. Whichever call obtains the session carries the
tool servers the handshake holds (:attr:`Handshake.mcp_servers`; ``session/resume`` omits the
key when there are none).

Some runtimes destroy a session's resumability when it is loaded in the same UTC minute it was
created (Gemini CLI names the session's journal after that minute, and a load in it starts the
journal afresh). So a load of a session whose creation time is known waits until that minute is
over (:class:`OriginLedger`): known because this process created it, or because whoever created
it kept the time and hands it in (``ledger.record(cwd, session_id, at=created)``; the command
line keeps it in its session history).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Final, Literal

import anyio

from ..logs import get_logger
from ..protocol.wire import load_params, resume_params
from .capabilities import Capability, CapabilityRecord

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..protocol.jsonrpc import Response
    from ..protocol.normalize import Normalizer
    from ..protocol.wire import InitializeResult
    from .handshake import Handshake

__all__ = ["NEGATIVE_CONTROL", "ORIGINS", "Continuation", "OriginLedger", "continue_session", "route_for"]

log = get_logger("remote_acp.session.continuation")
ERROR_TEXT_CAP: Final = 300
"""How much of a failed continuation's error message the reason quotes (masked, escaped, cut)."""

NEGATIVE_CONTROL: Final = "_remote-acp/probe/unimplemented"
_RETENTION = timedelta(minutes=2)
REPLAY_QUIET_S: Final = 0.25
"""How long a confirmed load's replay must pause to count as over."""
_NO_SESSION_YET: Final = "\x00no session yet"  # an id no agent sends: everything reads as foreign

Obtained = Literal["new", "loaded", "resumed", "fell back", "attached"]


@dataclass(frozen=True, slots=True)
class Continuation:
    """How the session was obtained, its id, and, when it fell back, why."""

    obtained: Obtained
    session_id: str
    reason: str = ""


class OriginLedger:
    """When each session was created, so a load can wait out the UTC minute of its creation.

    Sessions this process creates are recorded as they are created; a session created elsewhere
    (another process, an earlier run) is recorded by whoever kept its creation time, with
    ``record(..., at=created)``. Process-wide by default (:data:`ORIGINS`); the clock is
    injectable so tests need not wait. ``on_hold(session_id, seconds)``, when set, is called
    before a load waits, so a caller can say why nothing happens for a while.
    """

    def __init__(
        self,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        *,
        on_hold: Callable[[str, float], None] | None = None,
    ) -> None:
        self.clock = clock
        self.on_hold = on_hold
        self._created: dict[tuple[str, str], datetime] = {}

    def record(self, cwd: str, session_id: str, *, at: datetime | None = None) -> None:
        """Note that ``session_id`` (in ``cwd``) was created ``at`` (default: now).

        A time already known for the session is kept when it is later: the later of two
        creation times holds a load at least as long, and never ends a hold early.

        :raises ValueError: ``at`` has no time zone (it would be read in an unknown one).
        """
        if at is not None and at.utcoffset() is None:
            raise ValueError("the creation time must carry its time zone")
        now = self.clock()
        created = now if at is None else at
        self._created = {k: t for k, t in self._created.items() if now - t < _RETENTION}
        known = self._created.get((cwd, session_id))
        if now - created < _RETENTION and (known is None or created > known):
            self._created[(cwd, session_id)] = created

    def created(self, cwd: str, session_id: str) -> datetime | None:
        """When the session was created, if this ledger knows (it forgets times that can no
        longer hold a load as it records others)."""
        return self._created.get((cwd, session_id))

    def hold_for(self, cwd: str, session_id: str) -> float:
        """Seconds until the wall clock leaves the UTC minute of the session's creation (0..60)."""
        created = self._created.get((cwd, session_id))
        if created is None:
            return 0.0
        next_minute = created.astimezone(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
        return min(60.0, max(0.0, (next_minute - self.clock()).total_seconds()))


ORIGINS: Final = OriginLedger()


def route_for(init: InitializeResult) -> Literal["session/load", "session/resume"] | None:
    if init.load_session:
        return "session/load"
    if init.session_capability("resume"):
        return "session/resume"
    return None


async def continue_session(
    hs: Handshake,
    init: InitializeResult,
    *,
    resume_id: str,
    cwd: str,
    normalizer: Normalizer,
    activity: Callable[[], anyio.Event],
    capabilities: CapabilityRecord,
    ledger: OriginLedger,
    read_timeout_ms: int,
) -> Continuation:
    """Continue ``resume_id`` by the advertised route, or fall back to a new session.

    ``activity`` returns an event set when the agent next sends something (replay evidence).

    :raises RemoteAcpError: when the connection is lost, or the fallback ``session/new`` fails.
    """
    method = route_for(init)
    if method is None:
        return await _fall_back(
            hs, cwd, read_timeout_ms, normalizer, capabilities, ledger, "the agent advertises no way to continue"
        )

    control = await hs.request(NEGATIVE_CONTROL, {}, read_timeout_ms)
    if control is None:
        log.warning("continuation negative control timed out", extra={"method": NEGATIVE_CONTROL})
        return await _fall_back(
            hs,
            cwd,
            read_timeout_ms,
            normalizer,
            capabilities,
            ledger,
            "the agent did not answer a probe within read_timeout_ms",
        )
    control_code = control.error.code if control.error is not None else None

    if method == "session/load":
        hold = ledger.hold_for(cwd, resume_id)
        if hold > 0:
            log.info("holding session/load until the creation minute is over", extra={"hold_s": round(hold, 3)})
            if ledger.on_hold is not None:
                ledger.on_hold(resume_id, hold)
            await anyio.sleep(hold)
        failure = await _load(hs, resume_id, cwd, normalizer, activity, read_timeout_ms, control_code)
        obtained: Obtained = "loaded"
    else:
        params = resume_params(resume_id, cwd, hs.mcp_servers)
        failure = _judge(await hs.request(method, params, read_timeout_ms), method, control_code, normalizer)
        obtained = "resumed"
    if failure is not None:
        return await _fall_back(hs, cwd, read_timeout_ms, normalizer, capabilities, ledger, failure)
    return Continuation(obtained, resume_id)


async def _load(
    hs: Handshake,
    resume_id: str,
    cwd: str,
    normalizer: Normalizer,
    activity: Callable[[], anyio.Event],
    read_timeout_ms: int,
    control_code: int | None,
) -> str | None:
    """Load and wait for replay evidence; the reason it failed, or ``None`` when confirmed.

    A runtime that replays after its answer (Gemini CLI, sometimes) may still be replaying when
    the first chunk confirms the load: so the load waits until the replay pauses for
    :data:`REPLAY_QUIET_S` (within ``read_timeout_ms``), so the whole replay is history and none of
    it is read as the first turn's reply. A confirmed load leaves the normalizer replaying; the
    session core stops that when it sends the first prompt.
    """
    normalizer.session_id = resume_id  # the replay names the loaded session
    normalizer.replaying = True
    normalizer.replay_chunks = 0
    confirmed = False
    try:
        params = load_params(resume_id, cwd, hs.mcp_servers)
        response = await hs.request("session/load", params, read_timeout_ms)
        failure = _judge(response, "session/load", control_code, normalizer)
        if failure is not None:
            return failure
        deadline = time.monotonic() + read_timeout_ms / 1000
        while normalizer.replay_chunks == 0 and (left := deadline - time.monotonic()) > 0:
            with anyio.move_on_after(left):
                await activity().wait()
        if normalizer.replay_chunks == 0:
            return "session/load answered but replayed no message"
        # Which chunks came before the answer cannot be told from here (one read may hold the
        # answer and part of the replay), so every confirmed load waits for the pause.
        await _replay_pause(normalizer, activity, deadline)
        confirmed = True
        return None
    finally:
        if not confirmed:
            normalizer.replaying = False


async def _replay_pause(normalizer: Normalizer, activity: Callable[[], anyio.Event], deadline: float) -> None:
    """Wait until no replay chunk arrived for :data:`REPLAY_QUIET_S`, or ``deadline``."""
    while (left := deadline - time.monotonic()) > 0:
        seen = normalizer.replay_chunks
        with anyio.move_on_after(min(REPLAY_QUIET_S, left)):
            while normalizer.replay_chunks == seen:
                await activity().wait()
        if normalizer.replay_chunks == seen:
            return


def _judge(response: Response | None, method: str, control_code: int | None, normalizer: Normalizer) -> str | None:
    if response is None:
        return f"{method} was not answered within read_timeout_ms"
    if response.error is None:
        return None
    code = response.error.code
    if code == control_code:
        log.debug("continuation method not implemented", extra={"method": method, "code": code})
    else:
        log.warning("continuation call failed", extra={"method": method, "code": code})
    # The runtime's words may quote a credential, and become a notice and a log line.
    return f"{method} error {code}: {normalizer.masker.quote(response.error.message, ERROR_TEXT_CAP)}"


async def _fall_back(
    hs: Handshake,
    cwd: str,
    read_timeout_ms: int,
    normalizer: Normalizer,
    capabilities: CapabilityRecord,
    ledger: OriginLedger,
    why: str,
) -> Continuation:
    capabilities.lower(Capability.SESSION_CONTINUATION, why)
    # Until the new session's id is known, nothing is taken as ours: a late replay of the session
    # that could not be continued must not pass for the new session's output.
    normalizer.session_id = _NO_SESSION_YET
    session_id = await hs.new_session(cwd, read_timeout_ms)
    ledger.record(cwd, session_id)
    return Continuation("fell back", session_id, why)
