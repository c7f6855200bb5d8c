"""An ACP session on a launched agent: start, turns, and a teardown that always ends.

Theory of operation: :func:`start_session` launches the agent on a target, performs
``initialize`` and ``session/new`` (or a continuation) and returns a :class:`Session` whose
tasks run in a task group the caller owns; :func:`open_session` is the same as a context
manager with a task group of its own. Three parties meet in a session:

- the connection's reader task hands everything the agent sends to the :class:`Inbox`, which
  routes it into the turn in flight (its :class:`TurnMachine`) or keeps it for the next turn;
- the session's supervisor task applies the turn's bounds on time, sends ``session/cancel``
  when the machine asks for it, and finishes a turn whose connection was lost. It runs whatever
  the caller does, so a slow caller (or one that stopped iterating) cannot delay a bound;
- the caller's task takes the turn's events through a :class:`TurnStream`, from any task.

Teardown follows one fixed order (:mod:`remote_acp.session.teardown`), shielded from
cancellation, whether or not the session finished starting, and whichever task asks for it.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from .. import masking
from ..errors import Cause, ErrorKind, RemoteAcpError
from ..events import Event, Notification, SessionStarted, TokenLowerBound, TokenUsage, TurnEnded, utc_now
from ..logs import ContextLogger, get_logger
from ..mcp import plan_delivery
from ..measure import Measurement
from ..protocol.normalize import VENDOR_TOKEN_FIELD, Normalizer, vendor_token_figure
from ..protocol.wire import prompt_params
from ..targets.launch import LaunchSpec, LocalTarget
from ..targets.process import AgentProcess
from .capabilities import Capability, CapabilityRecord
from .connection import AgentConnection
from .continuation import ORIGINS, Continuation, Obtained, OriginLedger, continue_session, route_for
from .exits import ended, ended_cause
from .filesystem import FileServer, file_access
from .handshake import Handshake, close_method, method_ids
from .inbox import Inbox
from .remote_rules import rules_for
from .stream import TurnStream
from .teardown import ProtocolClose, stop_agent
from .turn import Ending, TurnBounds, TurnMachine, TurnResult, not_started

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from ..options import SessionOptions
    from ..protocol.wire import AgentInfo, InitializeResult
    from ..targets.launch import LaunchTarget
    from .filesystem import FileAccess

__all__ = ["Session", "SessionInfo", "open_session", "start_session"]

_SETTLE_SLACK_S = 1.0  # beyond read_timeout_ms, how long an abandoned turn may take to settle


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
    obtained: Obtained = "new"
    """How the session was obtained: new, loaded, resumed, or fell back (to a new session)."""
    auth_methods: tuple[str, ...] = ()
    """The ids of the ``authMethods`` the handshake listed (the agent may ask to authenticate)."""
    measured: bool = False
    """Whether a confirmed measurement source reads this session's token figures now (never on a
    remote launch; ``False`` again once a source is dropped): unmeasured means "not measured"."""


class Session:
    """A live ACP session. Obtain one with :func:`open_session` or :func:`start_session`."""

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
        self._bounds = TurnBounds(
            turn_s=options.turn_timeout_ms / 1000,
            stall_s=options.stall_timeout_ms / 1000,
            read_s=self._read_s,
            turn_ms=options.turn_timeout_ms,
            stall_ms=options.stall_timeout_ms,
        )
        self.log = ContextLogger(get_logger("remote_acp.session"), {"host": target.label, "component": "session"})
        self._process: AgentProcess | None = None
        self._conn: AgentConnection | None = None
        self._normalizer = Normalizer()
        self._inbox = Inbox(self._normalizer, self.log, self._poke)
        self._close_method: str | None = None
        self._auth_hint = ""  # the agent's login instructions, for a credential refused mid-session
        self._agent: AgentInfo | None = None  # what initialize said of the agent, once it answered
        self._info: SessionInfo | None = None
        self._wake = anyio.Event()
        self._supervisor_scope: anyio.CancelScope | None = None
        self._guard_scope: anyio.CancelScope | None = None
        self._torn_down = anyio.Event()
        self._tearing_down = False
        self._grace_s = options.stop_grace_ms / 1000
        self._secrets: tuple[str, ...] | None = None
        self._measurement: Measurement | None = None
        self._vendor_figure: tuple[int, int] | None = None  # on the latest prompt result
        self._figured: TurnMachine | None = None  # the latest turn whose figures were handed out
        self._measure_ended = anyio.Event()  # ends a turn's wait for its figures early

    # -- public -------------------------------------------------------------------------------

    @property
    def info(self) -> SessionInfo:
        """What the handshake established (available once the session has started)."""
        if self._info is None:
            raise RuntimeError("the session has not started; use `async with open_session(...) as session:`")
        return self._info

    @property
    def session_id(self) -> str:
        return self._info.session_id if self._info else ""

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def measured(self) -> bool:
        """Whether a confirmed measurement source reads this session now (see :class:`SessionInfo`)."""
        return self._measurement is not None and self._measurement.measured

    @property
    def closed(self) -> bool:
        """Whether teardown has begun (no turn can start any more)."""
        return self._tearing_down

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

    async def run_turn(
        self, text: str, on_event: Callable[[Event], Awaitable[object] | object] | None = None
    ) -> TurnResult:
        """Run one turn, passing each event to ``on_event`` (awaited when it returns an
        awaitable: a slow consumer pushes back on the agent, while the turn's bounds still fire on
        time); return how it ended. Never raises for a turn that failed or never started: that
        is the result's ``error`` (``outcome`` ``turn_not_started`` when the prompt never
        reached the agent)."""
        async with self.turn(text) as turn:
            async for event in turn:
                if on_event is not None:
                    returned = on_event(event)
                    if inspect.isawaitable(returned):
                        await returned
        return turn.result

    def cancel(self) -> None:
        """Cancel the turn in flight, if any: ``session/cancel`` is sent once and the runtime's
        own answer awaited for up to ``read_timeout_ms``; the turn ends ``turn_cancelled``."""
        if (machine := self._inbox.turn) is not None:
            self._cancel_turn(machine)
        else:  # a turn that ended may still be waiting for its figures: it ends unmeasured
            self._end_measure_wait()

    def kill(self) -> None:
        """Stop at once: the turn in flight ends ``turn_cancelled`` now, without waiting for the
        runtime, and teardown skips the graceful window (the agent's tree is killed right away).
        For a second Ctrl-C, or an outer deadline that has no time left."""
        self._grace_s = 0.0
        if (machine := self._inbox.turn) is not None:
            machine.stop(Ending.cancelled("the turn was stopped at once"))
            self._settle(machine)

    async def aclose(self, *, grace_ms: int | None = None) -> None:
        """Tear the session down from any task (also the one a pool closes warm sessions from).

        A turn still running in another task ends at once (``turn_cancelled``). Teardown takes
        at most ``stop_grace_ms`` (or ``grace_ms``) plus about a second; ``grace_ms=0`` kills the
        agent's tree without a graceful window.
        """
        if grace_ms is not None:
            self._grace_s = min(self._grace_s, max(0, grace_ms) / 1000)
        await self._teardown()

    # -- start --------------------------------------------------------------------------------

    async def _start(self, tg: anyio.abc.TaskGroup) -> None:
        options = self._options
        # Tool servers are read (local launches only) and checked before anything is launched.
        tools = plan_delivery(options, rules_for(self._target.remote), verification=self._verification)
        spec = await self._target.prepare(options.command, self._workspace)
        # Every value known to be secret is masked in all this session lets out, logs included.
        secrets = self._secrets = (*spec.secrets, *tools.secrets)
        # The stderr tail masks with the spec's secrets: the tool servers' (the agent's children,
        # sharing its stderr) are among them.
        spec = dataclasses.replace(spec, secrets=tuple(sorted(set(secrets), key=len, reverse=True)))
        masking.register(secrets)
        self._normalizer.secrets = secrets
        files = file_access(options, remote=self._target.remote)
        if files.enabled:
            self._inbox.serve_files(FileServer(self._workspace, files), tg)
        tg.start_soon(self._supervise, name="remote-acp turn supervisor")
        tg.start_soon(self._guard, name="remote-acp session guard")
        measurement = self._measurement = Measurement(
            spec.argv, allowed=rules_for(self._target.remote).measurement, log=self.log
        )
        while True:  # restart to settle the measurement source (see remote_acp.measure)
            armed = measurement.arm_start()
            hs, init = await self._launch(dataclasses.replace(spec, env=spec.env | armed), files, tg)
            name = init.agent_info.name if init.agent_info else ""
            if not measurement.settle(name):
                break
            self.log.info("restarting the agent to settle the measurement source", extra={"agent_name": name})
            assert self._conn is not None and self._process is not None  # set by _launch
            await stop_agent(
                self._conn,
                self._process,
                grace_s=self._grace_s,
                drain_s=options.output_drain_ms / 1000,
                close=None,
                log=self.log,
            )
        # Declared before the first turn, so nothing has been lowered yet.
        self.capabilities = CapabilityRecord(remote=self._target.remote, measured=measurement.measured)
        if not measurement.measured:
            self.log.info("token counts not measured", extra={"reason": measurement.why_not})
        process = self._process
        assert process is not None  # set by _launch
        rendered = tools.render(init, self.log)
        hs.mcp_servers = rendered.servers
        for why in rendered.withheld:
            self.capabilities.lower(Capability.TOOL_SERVERS, why)
        agent = self._agent = init.agent_info
        if agent is None:
            self.capabilities.lower(Capability.AGENT_VERSION, "initialize carried no agentInfo")
        if route_for(init) is None:
            self.capabilities.lower(
                Capability.SESSION_CONTINUATION, "the handshake advertises neither session/load nor session/resume"
            )
        self._close_method = close_method(init, verification=self._verification)
        self._auth_hint = hs.auth_hint
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
        self._info = SessionInfo(
            session_id=session_id,
            pid=process.pid,
            target=self._target.label,
            workspace=self._workspace,
            agent_name=agent.name if agent else "",
            agent_version=agent.version if agent else "",
            agent_capabilities=init.agent_capabilities,
            obtained=continuation.obtained,
            auth_methods=method_ids(init.auth_methods),
            measured=measurement.measured,
        )
        self.log.info(
            "agent implementation",
            extra={"agent_name": self._info.agent_name, "agent_version": self._info.agent_version},
        )

    async def _launch(
        self, spec: LaunchSpec, files: FileAccess, tg: anyio.abc.TaskGroup
    ) -> tuple[Handshake, InitializeResult]:
        """One start of the agent, up to its ``initialize`` answer."""
        options = self._options
        async with self._target.start_slot():  # a host's limit on connection attempts in progress
            self._process = process = await AgentProcess.start(spec, stderr_tail_bytes=options.stderr_tail_bytes)
            self.log.bind(pid=process.pid)
            self._normalizer.pid = process.pid
            self._conn = self._inbox.conn = AgentConnection(
                process,
                self._inbox,
                max_line_bytes=options.max_line_bytes,
                output_drain_ms=options.output_drain_ms,
                stdin_prefix=spec.stdin_prefix,
                ready_marker=spec.ready_marker,
                ready_reply=spec.ready_reply,
                ready_gate=spec.ready_gate,
            )
            self._conn.start(tg)
            hs = Handshake(
                self._conn,
                process,
                self._target,
                drain_ms=options.output_drain_ms,
                secrets=self._secrets or (),
                ready_timeout_ms=spec.ready_timeout_ms,
            )
            floor = options.initialize_floor_ms
            init = await hs.initialize(options.read_timeout_ms, floor, fs_read=files.read, fs_write=files.write)
        return hs, init

    # -- turns --------------------------------------------------------------------------------

    def _not_started(self, kind: ErrorKind, message: str, *, cause: Cause | None = None) -> tuple[TurnResult, Event]:
        error = RemoteAcpError(kind, message, cause=cause)
        return not_started(self.session_id, self.pid, error)

    async def _accept(self, text: str) -> TurnMachine | tuple[TurnResult, Event]:
        """Start a turn: its machine once the prompt is on its way, else why it never started."""
        conn = self._conn
        if conn is None or self._info is None:
            return self._not_started(ErrorKind.RESPONSE_ERROR, "the session has not started", cause=Cause.MISUSE)
        if self._tearing_down:
            return self._not_started(ErrorKind.RESPONSE_ERROR, "the session is closed", cause=Cause.MISUSE)
        if self._inbox.turn is not None:
            return self._not_started(
                ErrorKind.RESPONSE_ERROR, "a turn is already in flight for this session", cause=Cause.MISUSE
            )
        if conn.lost.is_set() or conn.write_failed:
            message = conn.loss_message if conn.output_abandoned else _ENDED_BEFORE_TURN
            status = self._process.exit_status if self._process is not None else None
            return self._not_started(
                ErrorKind.PORT_EXIT, message, cause=ended_cause(status, remote=self._target.remote, started=True)
            )
        machine = TurnMachine(text, self._bounds, now=time.monotonic(), session_id=self.session_id, pid=self.pid)
        opening: list[Event] = [SessionStarted(timestamp=utc_now(), pid=self.pid, session_id=self.session_id)]
        if (gaps := self.capabilities.take_notice()) is not None:
            opening.append(Notification(timestamp=utc_now(), pid=self.pid, session_id=self.session_id, message=gaps))
        self._inbox.attach(machine, opening)
        if self._inbox.latched is not None:
            # A request between turns already decided this turn: it ends without a prompt.
            machine.induce(self._inbox.latched)
            self._inbox.latched = None
            machine.tick(time.monotonic())
            self._settle(machine)
            return machine
        # What arrives from now on answers this prompt; a loaded session's replay is over.
        self._normalizer.replaying = False
        prompt = conn.call("session/prompt", prompt_params(self.session_id, text))
        self._inbox.prompt = prompt
        prompt.on_done = lambda: self._on_prompt_done(machine)
        try:
            with anyio.move_on_after(self._read_s):
                await prompt.ticket.done.wait()
        except BaseException:
            # The caller stopped waiting. A prompt still queued is taken back: the turn never
            # existed. One that (partly) reached the runtime is settled like a cancelled turn, so
            # the session is neither wedged "in flight" nor handed this turn's late output.
            if conn.retract(prompt.ticket):
                conn.abandon(prompt)
                self._inbox.detach(give_back=True)
            else:
                machine.on_prompt_sent()
                await self._abort(machine)
            raise
        if not prompt.ticket.done.is_set():
            if conn.retract(prompt.ticket):
                conn.abandon(prompt)
                self._inbox.detach(give_back=True)
                return self._not_started(
                    ErrorKind.RESPONSE_TIMEOUT, "timed out waiting for the agent connection to start the turn"
                )
            # Part of the prompt went out and the rest cannot: the agent stopped reading.
            machine.on_prompt_sent()
            conn.give_up_writing()
            machine.stop(Ending.port_exit(_NOT_READING.format(ms=self._options.read_timeout_ms)))
            self._settle(machine)
            return machine
        if prompt.ticket.failed:
            conn.abandon(prompt)
            self._inbox.detach(give_back=True)
            return self._not_started(ErrorKind.PORT_EXIT, "failed to send the prompt to the agent")
        machine.on_prompt_sent()
        self._poke()
        return machine

    def _on_prompt_done(self, machine: TurnMachine) -> None:
        """The prompt's answer arrived, or the connection ended first (from the reader)."""
        prompt = self._inbox.prompt
        if machine is not self._inbox.turn or prompt is None:
            return
        response = prompt.response
        if response is None and prompt.unreadable is not None:
            machine.on_unreadable_answer(f"the agent's answer to the prompt could not be read: {prompt.unreadable}")
        elif response is None:
            machine.on_lost()
        else:
            self._vendor_figure = vendor_token_figure(response.result)
            machine.on_answer(response.result, response.error, self._normalizer.masker, hint=self._auth_hint)
        self._settle(machine)
        self._poke()

    async def _next_events(self, machine: TurnMachine) -> list[Event]:
        """The turn's events the caller has not taken; waits for some (or for the end)."""
        inbox, conn = self._inbox, self._conn
        while True:
            if machine.result is not None and machine is not self._figured:
                # The terminal event waits for the turn's figures; what precedes it goes now.
                if len(machine.events) > 1:
                    terminal = machine.events.pop()
                    events = machine.take_all()
                    machine.events.append(terminal)
                    return events
                self._figured = machine
                return [*await self._turn_figures(machine), *machine.take_all()]
            if machine.events:
                events = machine.take_all()
                if conn is not None and conn.reader_paused:
                    conn.resume_reading()
                return events
            if machine.result is not None:
                return []
            wake = inbox.turn_wake
            if wake.is_set():
                wake = inbox.turn_wake = anyio.Event()
                continue
            await wake.wait()

    async def _turn_figures(self, machine: TurnMachine) -> list[Event]:
        """A turn's token events: the vendor's lower bound, if its result carried one, and the
        measurement source's figure, if the session is measured and the source answered."""
        events: list[Event] = []
        vendor, self._vendor_figure = self._vendor_figure, None
        ending = machine.events[-1] if machine.events else None
        answered = machine.ending is None and isinstance(ending, TurnEnded) and ending.stop_reason is not None
        if vendor is not None and answered:
            events.append(
                TokenLowerBound(
                    timestamp=utc_now(),
                    pid=self.pid,
                    session_id=self.session_id,
                    input_tokens=vendor[0],
                    output_tokens=vendor[1],
                    source=VENDOR_TOKEN_FIELD,
                )
            )
        measurement = self._measurement
        if measurement is None or not measurement.measured or self._tearing_down:
            return events
        self._measure_ended = anyio.Event()
        figure, dropped = await measurement.after_turn(
            self.session_id, answered=answered, wait_s=self._read_s, lower_bound=vendor, ended=self._measure_ended
        )
        if figure is not None:
            events.append(
                TokenUsage(
                    timestamp=utc_now(),
                    pid=self.pid,
                    session_id=self.session_id,
                    model=figure.model,
                    input_tokens=figure.input_tokens,
                    output_tokens=figure.output_tokens,
                    cache_read_tokens=figure.cache_read_tokens,
                    total_tokens=figure.total_tokens,
                )
            )
        if dropped is not None:
            self.capabilities.lower(Capability.TOKEN_COUNTS, dropped)
            if self._info is not None:
                self._info = dataclasses.replace(self._info, measured=False)
        return events

    def _end_measure_wait(self) -> None:
        self._measure_ended.set()

    def _cancel_turn(self, machine: TurnMachine) -> None:
        if machine.result is None:
            machine.induce(Ending.cancelled())
            self._poke()

    async def _abort(self, machine: TurnMachine) -> None:
        """The caller stopped waiting: cancel the turn and settle it within ``read_timeout_ms``."""
        with anyio.CancelScope(shield=True):
            if machine.result is not None:
                return
            self._cancel_turn(machine)
            with anyio.move_on_after(self._read_s + _SETTLE_SLACK_S):
                while machine.result is None:
                    await self._next_events(machine)
            if machine.result is None:  # cannot happen while the supervisor runs; never wedge anyway
                machine.stop(Ending.cancelled())
                self._settle(machine)
            machine.take_all()

    def _settle(self, machine: TurnMachine) -> None:
        """A turn that has its result: flush the last message into it and let the next turn in."""
        if machine.result is None or machine is not self._inbox.turn:
            return
        # The terminal event is last: move it behind the message the normalizer still holds.
        terminal = machine.events.pop()
        self._normalizer.flush(machine.events.append)
        self._normalizer.flush_dropped(machine.events.append)
        machine.events.append(terminal)
        machine.result = dataclasses.replace(machine.result, last_message=self.last_message)
        prompt = self._inbox.prompt
        if prompt is not None and self._conn is not None and not prompt.done.is_set():
            self._conn.abandon(prompt)
        if machine.ending is not None and machine.ending.kind is ErrorKind.TURN_INPUT_REQUIRED:
            self.log.warning("agent asked for a decision only a person can make, ending the attempt")
        self._inbox.detach()
        self._inbox.turn_wake.set()

    # -- the supervisor -----------------------------------------------------------------------

    def _poke(self) -> None:
        self._wake.set()

    async def _supervise(self) -> None:
        """Apply the bounds of the turn in flight on time, whatever its caller is doing."""
        with anyio.CancelScope() as scope:
            self._supervisor_scope = scope
            while True:
                wake = self._wake = anyio.Event()
                machine = self._inbox.turn
                if machine is None:
                    await wake.wait()
                    continue
                now = time.monotonic()
                self._step(machine, now)
                if machine.result is None and machine.lost:
                    wait_s = min(1.0, self._options.output_drain_ms / 1000)
                    end = await ended(self._process, wait_s=wait_s, remote=self._target.remote, started=True)
                    conn = self._conn
                    message = conn.loss_message if conn is not None else "the agent's connection ended"
                    machine.finish_lost(message, end.detail, cause=end.cause, facts=end.facts)
                    self._settle(machine)
                    continue
                if machine.result is not None:
                    continue
                deadline = min(machine.next_deadline(), self._writer_deadline())
                if deadline > now:
                    with anyio.move_on_after(deadline - now if deadline < math.inf else math.inf):
                        await wake.wait()

    def _writer_deadline(self) -> float:
        conn = self._conn
        if conn is None or conn.writing_since is None or conn.write_failed:
            return math.inf
        return conn.writing_since + self._read_s

    def _step(self, machine: TurnMachine, now: float) -> None:
        conn = self._conn
        if conn is not None and conn.writing_since is not None and now >= conn.writing_since + self._read_s:
            # A write waited read_timeout_ms for the agent to read: it stopped reading its input.
            conn.give_up_writing()
            machine.stop(Ending.port_exit(_NOT_READING.format(ms=self._options.read_timeout_ms)))
        machine.tick(now)
        if machine.take_cancel(now) and conn is not None:
            conn.notify("session/cancel", {"sessionId": self.session_id})
        if conn is not None:
            conn.resume_reading()  # an ending decided: the reader must read on to find the answer
        self._settle(machine)

    # -- teardown -----------------------------------------------------------------------------

    async def _guard(self) -> None:
        """Tear the session down when the task group it runs in is cancelled without
        :meth:`aclose` (the caller's block failed): the connection's tasks are shielded, and
        would otherwise keep that group open forever. Ends once the session is torn down."""
        with anyio.CancelScope() as scope:
            self._guard_scope = scope
            if self._tearing_down:  # torn down before this task got to run
                return
            try:
                await anyio.sleep_forever()
            finally:
                if not scope.cancel_called:  # cancelled from outside, not by our own teardown
                    with anyio.CancelScope(shield=True):
                        await self._teardown()

    async def _teardown(self) -> None:
        """Stop the session in the fixed order (see :mod:`remote_acp.session.teardown`); every
        task that asks waits for the same teardown, which always ends."""
        with anyio.CancelScope(shield=True):
            if self._tearing_down:
                await self._torn_down.wait()
                return
            self._tearing_down = True
            self._end_measure_wait()
            try:
                if (machine := self._inbox.turn) is not None:
                    machine.stop(Ending.cancelled(_CLOSED_MID_TURN))
                    self._settle(machine)
                conn, process = self._conn, self._process
                if conn is None or process is None:
                    return
                close = (
                    ProtocolClose(self._close_method, self.session_id) if self._close_method and self._info else None
                )
                await stop_agent(
                    conn,
                    process,
                    grace_s=self._grace_s,
                    drain_s=self._options.output_drain_ms / 1000,
                    close=close,
                    log=self.log,
                )
                if self._inbox.between.events:
                    self.log.warning(
                        "dropping events queued for a turn that never started",
                        extra={"count": len(self._inbox.between.events)},
                    )
                    self._inbox.between.take()
            finally:
                if self._supervisor_scope is not None:
                    self._supervisor_scope.cancel()
                if self._guard_scope is not None:
                    self._guard_scope.cancel()
                if self._secrets is not None:
                    masking.unregister(self._secrets)
                    self._secrets = None
                if self._measurement is not None:
                    self._measurement.close()
                self._torn_down.set()


_ENDED_BEFORE_TURN = "the agent connection ended before this turn could start"
_CLOSED_MID_TURN = "the session was closed while the turn was running"
_NOT_READING = "the agent stopped reading its input: a write waited read_timeout_ms ({ms} ms)"


async def start_session(
    task_group: anyio.abc.TaskGroup,
    workspace: str,
    options: SessionOptions,
    target: LaunchTarget | None = None,
    *,
    resume: str | None = None,
    ledger: OriginLedger = ORIGINS,
    _verification: bool = False,
) -> Session:
    """Start a session whose tasks run in ``task_group``; close it with :meth:`Session.aclose`
    from any task (the group ends once it is closed). For pools of warm sessions and schedulers
    that own their task groups; :func:`open_session` is the same as a context manager.

    :raises RemoteAcpError: with the start-up error kinds (see :func:`open_session`). The agent
        is torn down before the error is raised.
    """
    session = Session(
        target or LocalTarget(), workspace, options, resume_id=resume, verification=_verification, ledger=ledger
    )
    try:
        await session._start(task_group)
    except BaseException as exc:
        await session._teardown()
        if session._process is not None and isinstance(exc, RemoteAcpError):
            # The tail was masked as it was kept (teardown has unregistered the secrets since).
            for line in session._process.stderr_tail.lines():
                session.log.warning("agent stderr: %s", line)
        if isinstance(exc, RemoteAcpError):
            known = _start_facts(session, exc)
            if known:
                raise exc.with_facts(**known) from exc.__cause__
        raise
    return session


def _start_facts(session: Session, error: RemoteAcpError) -> dict[str, str]:
    """What the start knew that ``error`` does not say: the host it failed on (whatever failed),
    and the agent's name and version once ``initialize`` answered."""
    known: dict[str, str] = {}
    if error.facts.destination is None and session._target.remote:
        known["destination"] = session._target.label
    agent = session._agent
    if agent is not None and error.facts.agent_name is None:
        known["agent_name"] = agent.name
        if agent.version:
            known["agent_version"] = agent.version
    return known


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

    Leaving the block tears the session down: a turn left running is settled within
    ``read_timeout_ms``, then teardown takes at most ``stop_grace_ms`` plus about a second. A
    caller with an outer deadline bounds both by calling :meth:`Session.kill` (or
    ``aclose(grace_ms=0)``) first.

    :raises RemoteAcpError: with the start-up error kinds (``agent_not_found``,
        ``invalid_workspace_cwd``, ``port_exit``, ``response_error``, ``response_timeout``,
        ``credential_unverified``). The agent is torn down before the error is raised.
    """
    failure: BaseException | None = None
    body_error: BaseException | None = None
    teardown_error: BaseException | None = None
    async with anyio.create_task_group() as tg:
        try:
            session = await start_session(
                tg, workspace, options, target, resume=resume, ledger=ledger, _verification=_verification
            )
        except BaseException as exc:
            # Raised below, outside the task group, so it is not wrapped in an exception group.
            failure = exc
            tg.cancel_scope.cancel()
        else:
            try:
                yield session
            except BaseException as exc:
                # Re-raised below, outside the task group, so the caller's own exception is not
                # wrapped in an exception group.
                body_error = exc
            finally:
                try:
                    await session._teardown()
                except BaseException as exc:  # a bug in teardown: surfaced, unwrapped, after cleanup
                    teardown_error = exc
                tg.cancel_scope.cancel()
    if body_error is not None:
        raise body_error
    if teardown_error is not None:
        raise teardown_error
    if failure is not None:
        raise failure
