"""An ACP session on a launched agent: handshake, turns, unattended answers, teardown.

Theory of operation: :func:`open_session` launches the agent on a target, performs
``initialize`` and ``session/new`` and yields a :class:`Session`. The connection's reader task
calls the ``on_*`` methods below for everything the agent sends; they only record and enqueue,
never wait. A turn is driven by the caller's own task (:meth:`Session.turn`), which waits for
the reader's batches and applies the turn's bounds, so the hot path has no extra task or queue
hop per chunk. Teardown follows one fixed order, shielded from cancellation, whether or not the
session finished starting.
"""

from __future__ import annotations

import logging
import math
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from ..errors import ErrorKind, RemoteAcpError
from ..events import Event, Notification, SessionStarted, TurnEnded, TurnFailed, utc_now
from ..logs import ContextLogger
from ..masking import mask_secrets
from ..protocol.disposition import disposition_for_stop_reason
from ..protocol.normalize import Normalizer
from ..protocol.wire import InitializeResult, prompt_params
from ..targets.launch import LaunchTarget, LocalTarget
from ..targets.process import AgentProcess
from .capabilities import Capability, CapabilityRecord
from .connection import AgentConnection
from .continuation import ORIGINS, Continuation, OriginLedger, continue_session, route_for
from .handshake import Handshake
from .inbox import Inbox
from .teardown import ProtocolClose, stop_agent
from .turn import ActiveTurn, Ending, TurnResult, TurnStream

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from ..options import SessionOptions

__all__ = ["Session", "SessionInfo", "open_session"]


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """What the handshake established."""

    session_id: str
    pid: int
    target: str
    workspace: str
    agent_name: str
    agent_version: str
    agent_capabilities: dict[str, Any] = field(default_factory=dict)
    """The ``agentCapabilities`` the handshake advertised, as sent."""
    obtained: str = "new"
    """How the session was obtained: new, loaded, resumed, or fell back (to a new session)."""


def _close_method(init: InitializeResult, *, verification: bool) -> str | None:
    """How teardown ends the session through the protocol, if the handshake advertised a way:
    a verification session is deleted (else closed), any other one closed."""
    if verification and init.session_capability("delete"):
        return "session/delete"
    return "session/close" if init.session_capability("close") else None


class Session:
    """A live ACP session. Obtain one with :func:`open_session`."""

    def __init__(
        self,
        target: LaunchTarget,
        workspace: str,
        options: SessionOptions,
        *,
        resume_id: str | None = None,
        verification: bool = False,
        ledger: OriginLedger = ORIGINS,
    ) -> None:
        self._target = target
        self._resume_id = resume_id
        self._verification = verification
        self._ledger = ledger
        self.capabilities = CapabilityRecord(remote=target.remote)
        """What this session can deliver; only ever lowers (see :mod:`remote_acp.session.capabilities`)."""
        self._workspace = workspace
        self._options = options
        self._read_s = options.read_timeout_ms / 1000
        self.log = ContextLogger(
            logging.getLogger("remote_acp.session.core"), {"host": target.label, "component": "session"}
        )
        self._process: AgentProcess | None = None
        self._conn: AgentConnection | None = None
        self._normalizer = Normalizer()
        self._inbox = Inbox(self._normalizer, self.log)  # no tool servers are delivered yet
        self._close_method: str | None = None
        self._torn_down = False
        self.info: SessionInfo | None = None

    # -- public -------------------------------------------------------------------------------

    @property
    def session_id(self) -> str:
        return self.info.session_id if self.info else ""

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def last_message(self) -> str:
        """The latest completed agent message (at most 500 runes)."""
        return self._normalizer.last_message

    def turn(self, text: str) -> TurnStream:
        """A turn as an async context manager and iterator of events::

        async with session.turn("fix the build") as turn:
            async for event in turn:
                ...
        print(turn.result)
        """
        return TurnStream(self, text)

    async def run_turn(self, text: str, on_event: Callable[[Event], object] | None = None) -> TurnResult:
        """Run one turn, passing each event to ``on_event``; return how it ended.

        :raises RemoteAcpError: ``response_error`` when a turn is already in flight,
            ``port_exit`` when the connection is gone, ``response_timeout`` when the agent
            does not take the prompt within ``read_timeout_ms``.
        """
        async with self.turn(text) as turn:
            async for event in turn:
                if on_event is not None:
                    on_event(event)
        assert turn.result is not None
        return turn.result

    def cancel(self) -> None:
        """Cancel the turn in flight, if any: ``session/cancel`` is sent once and the runtime's
        own answer awaited for up to ``read_timeout_ms``; the turn ends ``turn_cancelled``."""
        if (turn := self._inbox.turn) is not None:
            turn.caller_cancelled = True
            turn.wake.set()

    # -- start --------------------------------------------------------------------------------

    async def _start(self, tg: anyio.abc.TaskGroup) -> None:
        options = self._options
        spec = await self._target.prepare(options.command, self._workspace)
        self._process = process = AgentProcess.spawn(spec, stderr_tail_bytes=options.stderr_tail_bytes)
        self.log.bind(pid=process.pid)
        self._normalizer.pid = process.pid
        self._conn = self._inbox.conn = AgentConnection(
            process,
            self._inbox,
            max_line_bytes=options.max_line_bytes,
            output_drain_ms=options.output_drain_ms,
            stdin_prefix=spec.stdin_prefix,
        )
        self._conn.start(tg)

        self._inbox.secrets = spec.secrets
        hs = Handshake(self._conn, process, self._target, drain_ms=options.output_drain_ms, secrets=spec.secrets)
        init = await hs.initialize(options.initialize_timeout_ms)
        agent = init.agent_info
        if agent is None:
            self.capabilities.lower(Capability.AGENT_VERSION, "initialize carried no agentInfo")
        if route_for(init) is None:
            self.capabilities.lower(
                Capability.SESSION_CONTINUATION, "the handshake advertises neither session/load nor session/resume"
            )
        self._close_method = _close_method(init, verification=self._verification)
        if self._resume_id:
            continuation = await continue_session(
                hs,
                init,
                resume_id=self._resume_id,
                cwd=self._workspace,
                normalizer=self._normalizer,
                activity=self._inbox.next_activity,
                capabilities=self.capabilities,
                ledger=self._ledger,
                read_timeout_ms=options.read_timeout_ms,
            )
            if continuation.obtained == "fell back":
                self._inbox.notice(
                    f"could not continue session {self._resume_id} ({continuation.reason}); "
                    "started a new session instead"
                )
        else:
            session_id = await hs.new_session(self._workspace, options.read_timeout_ms)
            self._ledger.record(self._workspace, session_id)
            continuation = Continuation("new", session_id)
        session_id = continuation.session_id
        self._normalizer.session_id = session_id
        self.log.bind(session_id=session_id)
        self.info = SessionInfo(
            session_id=session_id,
            pid=process.pid,
            target=self._target.label,
            workspace=self._workspace,
            agent_name=agent.name if agent else "",
            agent_version=agent.version if agent else "",
            agent_capabilities=init.agent_capabilities,
            obtained=continuation.obtained,
        )
        self.log.info(
            "agent implementation",
            extra={"agent_name": self.info.agent_name, "agent_version": self.info.agent_version},
        )

    # -- turns --------------------------------------------------------------------------------

    async def _accept(self, turn: ActiveTurn) -> None:
        conn = self._conn
        assert conn is not None and self.info is not None
        if self._inbox.turn is not None:
            raise RemoteAcpError(ErrorKind.RESPONSE_ERROR, "a turn is already in flight for this session")
        if conn.lost.is_set() or conn.write_failed:
            message = (
                conn.loss_message
                if conn.output_abandoned
                else "the agent connection ended before this turn could start"
            )
            raise RemoteAcpError(ErrorKind.PORT_EXIT, message)
        opening: list[Event] = [SessionStarted(timestamp=utc_now(), pid=self.pid, session_id=self.session_id)]
        if (gaps := self.capabilities.take_notice()) is not None:
            opening.append(Notification(timestamp=utc_now(), pid=self.pid, session_id=self.session_id, message=gaps))
        self._inbox.attach(turn, opening)
        turn.started_at = turn.last_event_at = time.monotonic()
        try:
            if self._inbox.latched is not None:
                # A request between turns already decided this turn: end it without a prompt.
                turn.ending, self._inbox.latched = self._inbox.latched, None
                return
            turn.prompt = conn.call("session/prompt", prompt_params(self.session_id, turn.text))
            with anyio.move_on_after(self._read_s):
                await turn.prompt.ticket.done.wait()
            if not turn.prompt.ticket.done.is_set():
                raise RemoteAcpError(
                    ErrorKind.RESPONSE_TIMEOUT, "timed out waiting for the agent connection to start the turn"
                )
            if turn.prompt.ticket.failed:
                raise RemoteAcpError(ErrorKind.PORT_EXIT, "failed to send the prompt to the agent")
        except BaseException:
            # The caller stopped waiting. A prompt still queued is taken back: the turn never
            # existed. One that (partly) reached the runtime is settled like a cancelled turn, so
            # the session is neither wedged "in flight" nor handed this turn's late output.
            if turn.prompt is None or conn.retract(turn.prompt.ticket):
                if turn.prompt is not None:
                    conn.abandon(turn.prompt)
                self._inbox.detach(give_back=True)
            else:
                await self._abort(turn)
            raise

    async def _advance(self, turn: ActiveTurn) -> list[Event]:
        """Wait for the turn's next events; the last batch ends with its terminal event."""
        while True:
            turn.wake = anyio.Event()
            self._apply_bounds(turn)
            events = turn.take()
            if turn.result is None and await self._try_end(turn):
                return events + turn.take()
            if events or turn.result is not None:
                return events
            now = time.monotonic()
            with anyio.move_on_after(max(0.0, self._next_deadline(turn) - now)):
                await turn.wake.wait()

    def _next_deadline(self, turn: ActiveTurn) -> float:
        opts = self._options
        deadlines = [math.inf]
        if turn.ending is None:  # once an ending is decided, only its own wait is left
            deadlines.append(turn.started_at + opts.turn_timeout_ms / 1000)
            if opts.stall_timeout_ms > 0:
                deadlines.append(turn.last_event_at + opts.stall_timeout_ms / 1000)
        if turn.cancel_sent_at is not None:
            deadlines.append(turn.cancel_sent_at + self._read_s)
        if turn.write_failed_at is not None:
            deadlines.append(turn.write_failed_at + self._read_s)
        return min(deadlines)

    def _apply_bounds(self, turn: ActiveTurn) -> None:
        if turn.ending is not None or (turn.prompt is not None and turn.prompt.done.is_set()):
            return  # already ending, or the runtime already answered: that answer decides
        opts, now = self._options, time.monotonic()
        if turn.caller_cancelled:
            self._inbox.end_turn_by(turn, Ending.cancelled())
        elif now >= turn.started_at + opts.turn_timeout_ms / 1000:
            self._inbox.end_turn_by(turn, Ending.timed_out(opts.turn_timeout_ms))
        elif opts.stall_timeout_ms > 0 and now >= turn.last_event_at + opts.stall_timeout_ms / 1000:
            self._inbox.end_turn_by(turn, Ending.stalled(opts.stall_timeout_ms))

    async def _try_end(self, turn: ActiveTurn) -> bool:
        conn = self._conn
        assert conn is not None
        now = time.monotonic()
        prompt = turn.prompt
        if prompt is None:  # ended before a prompt was sent (latched ending)
            assert turn.ending is not None
            self._finish(turn, turn.ending.event, turn.ending.kind, turn.ending.message)
            return True
        if turn.oversized and turn.ending is None:
            # The over-long line came before its answer and may have been the answer itself: the
            # outcome cannot be known. The runtime's side is cancelled and settled like any
            # induced ending, so nothing of this turn leaks into the next one.
            self._inbox.end_turn_by(
                turn, Ending.outcome_unknown("a line from the agent exceeded the connection's line bound")
            )
        if prompt.done.is_set() and prompt.response is not None:
            response = prompt.response
            result = response.result if isinstance(response.result, dict) else {}
            stop = result.get("stopReason")
            shown = stop if isinstance(stop, str) else None
            if turn.ending is not None:  # an induced ending overrides what the answer says
                self._finish(turn, turn.ending.event, turn.ending.kind, turn.ending.message, shown)
            elif response.error is not None:
                text = mask_secrets(response.error.message, self._inbox.secrets)
                message = f"session/prompt error {response.error.code}: {text}"
                self._finish(turn, TurnFailed, ErrorKind.RESPONSE_ERROR, message)
            elif "stopReason" in result:
                d = disposition_for_stop_reason(stop, cancel_requested=turn.cancel_sent_at is not None)
                self._finish(turn, d.event, d.error_kind, d.message, shown)
            else:
                why = "the agent's response to the prompt did not decode"
                self._finish(turn, TurnFailed, ErrorKind.TURN_OUTCOME_UNKNOWN, why)
            return True
        if conn.lost.is_set():
            self._finish(turn, TurnFailed, ErrorKind.PORT_EXIT, conn.loss_message, detail=await self._exit_detail())
            return True
        if turn.write_failed_at is not None and now >= turn.write_failed_at + self._read_s:
            self._finish(
                turn,
                TurnFailed,
                ErrorKind.PORT_EXIT,
                "a write to the agent failed and no answer followed within read_timeout_ms",
            )
            return True
        if turn.ending is not None and turn.cancel_sent_at is not None and now >= turn.cancel_sent_at + self._read_s:
            self._finish(turn, turn.ending.event, turn.ending.kind, turn.ending.message)
            return True
        return False

    async def _exit_detail(self) -> str:
        process = self._process
        assert process is not None
        with anyio.move_on_after(min(1.0, self._options.output_drain_ms / 1000)):
            await process.exited.wait()
        if process.exit_status is None:
            return ""
        return f"{process.exit_status.describe()}; stderr: {process.stderr_tail.report()}"

    def _finish(
        self,
        turn: ActiveTurn,
        event: type[TurnEnded],
        kind: ErrorKind | None,
        message: str,
        stop_reason: str | None = None,
        *,
        detail: str = "",
    ) -> None:
        self._normalizer.flush(turn.sink.append)
        error = RemoteAcpError(kind, message, detail=detail) if kind is not None else None
        turn.sink.append(
            event(
                timestamp=utc_now(),
                pid=self.pid,
                session_id=self.session_id,
                message=str(error) if error else message,
                error_kind=kind.value if kind else None,
                stop_reason=stop_reason,
            )
        )
        turn.result = TurnResult(
            session_id=self.session_id,
            outcome=event.type,
            message=str(error) if error else message,
            error=error,
            stop_reason=stop_reason,
            last_message=self._normalizer.last_message,
        )
        if turn.prompt is not None and self._conn is not None and not turn.prompt.done.is_set():
            self._conn.abandon(turn.prompt)
        if turn.ending is not None and turn.ending.kind is ErrorKind.TURN_INPUT_REQUIRED:
            self.log.warning("agent asked for a decision only a person can make, ending the attempt")
        self._inbox.detach()

    async def _abort(self, turn: ActiveTurn) -> None:
        """The caller stopped waiting: cancel the turn and settle it within ``read_timeout_ms``."""
        with anyio.CancelScope(shield=True):
            if turn.result is not None:
                return
            turn.caller_cancelled = True
            self._apply_bounds(turn)
            with anyio.move_on_after(self._read_s + 1):
                while turn.result is None:
                    await self._advance(turn)
            if turn.result is None:  # cannot happen while the bounds hold; never wedge anyway
                self._finish(
                    turn,
                    turn.ending.event if turn.ending else TurnFailed,
                    ErrorKind.TURN_CANCELLED,
                    "the turn was cancelled",
                )

    # -- teardown -----------------------------------------------------------------------------

    async def _teardown(self) -> None:
        """Stop the session in the fixed order (see :mod:`remote_acp.session.teardown`)."""
        with anyio.CancelScope(shield=True):
            if self._torn_down:
                return
            self._torn_down = True
            conn, process = self._conn, self._process
            if conn is None or process is None:
                return
            close = ProtocolClose(self._close_method, self.session_id) if self._close_method and self.info else None
            await stop_agent(
                conn,
                process,
                grace_s=self._options.stop_grace_ms / 1000,
                drain_s=self._options.output_drain_ms / 1000,
                close=close,
                log=self.log,
            )
            if self._inbox.queued:
                self.log.warning(
                    "dropping events queued for a turn that never started", extra={"count": len(self._inbox.queued)}
                )
                self._inbox.queued.clear()


@asynccontextmanager
async def open_session(
    workspace: str,
    options: SessionOptions,
    target: LaunchTarget | None = None,
    *,
    resume: str | None = None,
    ledger: OriginLedger = ORIGINS,
    _verification: bool = False,
) -> AsyncIterator[Session]:
    """Launch the agent on ``target`` (local by default), start an ACP session, stop it on exit.

    ``resume``: a session id saved from an earlier run, continued by the route the agent
    advertises (``session/load``, else ``session/resume``) or, when that cannot be confirmed, a
    new session (``session.info.obtained`` says which; the first turn carries a notice).
    ``ledger``: where this process's session creation times are kept (for the load spacing).

    :raises RemoteAcpError: with the start-up error kinds (``agent_not_found``,
        ``invalid_workspace_cwd``, ``port_exit``, ``response_error``, ``response_timeout``,
        ``credential_unverified``). The agent is torn down before the error is raised.
    """
    session = Session(
        target or LocalTarget(), workspace, options, resume_id=resume, verification=_verification, ledger=ledger
    )
    failure: BaseException | None = None
    body_error: BaseException | None = None
    async with anyio.create_task_group() as tg:
        try:
            await session._start(tg)
        except BaseException as exc:
            # Raised below, outside the task group, so it is not wrapped in an exception group.
            failure = exc
        if failure is not None:
            await session._teardown()
            tg.cancel_scope.cancel()
        else:
            try:
                yield session
            except BaseException as exc:
                # Re-raised below, outside the task group, so the caller's own exception is not
                # wrapped in an exception group.
                body_error = exc
            finally:
                await session._teardown()
                tg.cancel_scope.cancel()
    if body_error is not None:
        raise body_error
    if failure is not None:
        if session._process is not None and isinstance(failure, RemoteAcpError):
            for line in session._process.stderr_tail.lines():
                session.log.warning("agent stderr: %s", line)
        raise failure
