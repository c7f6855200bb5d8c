"""An ACP session on a launched agent: start, turns, and a teardown that always ends.

Theory of operation: :func:`start_session` launches the agent on a target, performs
``initialize`` and ``session/new`` (or a continuation) and returns a :class:`Session` whose
tasks run in a task group the caller owns; :func:`open_session` is the same as a context
manager with a task group of its own. Three parties meet in a session:

- the connection's reader task hands everything the agent sends to the :class:`Inbox`, which
  routes it into the turn in flight (its :class:`TurnMachine`) or keeps it for the next turn;
- the session's oversight task (:mod:`remote_acp.session.oversight`) applies the turn's bounds
  on time, sends ``session/cancel`` when the machine asks for it, and finishes a turn whose
  connection was lost. It runs whatever the caller does, so a slow caller (or one that stopped
  iterating) cannot delay a bound;
- the caller's task takes the turn's events through a :class:`TurnStream`, from any task
  (:mod:`remote_acp.session.turns` accepts the turn and hands its events out).

:class:`Session` is the facade over those parts: start-up (:mod:`remote_acp.session.startup`),
turns, oversight, the turn's token figures (:mod:`remote_acp.session.figures`) and closing
(:mod:`remote_acp.session.closing`), which share one
:class:`~remote_acp.session.state.SessionState`. Teardown follows one fixed order
(:mod:`remote_acp.session.teardown`), shielded from cancellation, whether or not the session
finished starting, and whichever task asks for it.
"""

from __future__ import annotations

import inspect
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio

from ..errors import Cause, ErrorKind, RemoteAcpError
from ..targets.launch import LocalTarget
from . import attaching, startup
from .closing import Closing
from .continuation import ORIGINS, OriginLedger
from .figures import TurnFigures
from .handle import SessionHandle
from .oversight import Oversight
from .state import SessionInfo, SessionState
from .stream import TurnStream
from .turn import Ending, TurnResult
from .turns import Turns

if TYPE_CHECKING:
    import contextlib
    from collections.abc import AsyncIterator, Awaitable, Callable

    from ..events import Event
    from ..logs import ContextLogger
    from ..options import SessionOptions
    from ..targets.agent_end import AgentEnd
    from ..targets.launch import LaunchTarget
    from .capabilities import CapabilityRecord
    from .connection import AgentConnection
    from .inbox import Inbox

__all__ = ["Session", "SessionInfo", "open_session", "open_verification_session", "start_session"]


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
        attach: SessionHandle | None = None,
    ) -> None:
        self._attach = attach
        self._adopt = attach.prompt_id if attach is not None else None
        self._resume_id = resume_id
        self._verification = verification
        self._ledger = ledger
        state = self._state = SessionState(target, workspace, options)
        self._figures = TurnFigures(state)
        self._turns = Turns(state, self._figures)
        self._oversight = Oversight(state, self._turns.settle)
        self._closing = Closing(state, settle=self._turns.settle, figures=self._figures, oversight=self._oversight)

    # -- public -------------------------------------------------------------------------------

    @property
    def info(self) -> SessionInfo:
        """What the handshake established (available once the session has started)."""
        if self._state.info is None:
            raise RuntimeError("the session has not started; use `async with open_session(...) as session:`")
        return self._state.info

    @property
    def capabilities(self) -> CapabilityRecord:
        """What this session can deliver; only ever lowers (see :mod:`remote_acp.session.capabilities`)."""
        return self._state.capabilities

    @property
    def log(self) -> ContextLogger:
        return self._state.log

    @property
    def session_id(self) -> str:
        return self._state.session_id

    @property
    def pid(self) -> int | None:
        return self._state.pid

    @property
    def measured(self) -> bool:
        """Whether a confirmed measurement source reads this session now (see :class:`SessionInfo`)."""
        measurement = self._state.measurement
        return measurement is not None and measurement.measured

    @property
    def closed(self) -> bool:
        """Whether teardown has begun (no turn can start any more)."""
        return self._state.closing

    @property
    def last_message(self) -> str:
        """The latest completed agent message (at most 500 runes)."""
        return self._state.normalizer.last_message

    @property
    def handle(self) -> SessionHandle | None:
        """What another process needs to take this session over (see :meth:`detach`): ``None``
        unless the session runs on a host with a reattach window. It names the prompt in flight,
        if any, so keep it up to date where a controller may die mid-turn (the CLI records it in
        its session history as each turn starts)."""
        process, info = self._state.process, self._state.info
        relay = process.relay if process is not None else None
        if relay is None or info is None:
            return None
        prompt = self._state.inbox.prompt
        in_flight = prompt.id if prompt is not None and not prompt.done.is_set() else None
        if in_flight is None and self._adopt is not None and self._state.inbox.turn is None:
            in_flight = self._adopt  # taken over, and not resumed yet
        agent = f"{info.agent_name} {info.agent_version}".strip()
        return SessionHandle(
            host=relay.destination,
            relay_id=relay.relay_id,
            secret=relay.secret,
            session_id=info.session_id,
            workspace=info.workspace,
            window_s=relay.window_s,
            agent=agent,
            close_method=self._state.close_method,
            prompt_id=in_flight if isinstance(in_flight, int) else None,
            config_file=relay.config_file,
        )

    async def detach(self) -> SessionHandle:
        """Let go of the session without ending it: its host keeps the agent, its slot and its
        output (bounded) for the reattach window, for :func:`remote_acp.attach_session` (or
        ``remote-acp attach``) to take over from another process. Between turns only; this
        :class:`Session` is closed afterwards.

        :raises RemoteAcpError: ``misuse`` for a session without a reattach window, not started,
            closed, or with a turn in flight.
        """
        handle = self.handle
        state = self._state
        if handle is None or state.closing or state.process is None:
            raise RemoteAcpError(
                ErrorKind.RESPONSE_ERROR,
                "only a started session on a host with a reattach window can be detached",
                cause=Cause.MISUSE,
            )
        if state.inbox.turn is not None:
            raise RemoteAcpError(
                ErrorKind.RESPONSE_ERROR, "a turn is in flight: detach between turns", cause=Cause.MISUSE
            )
        state.close_method = None  # the session goes on, on its host
        await state.process.detach()
        await self.aclose()
        return handle.detached()

    def resume_turn(self) -> TurnStream:
        """The turn that was in flight when this session was taken over (its handle's
        ``prompt_id``), as a turn: what the agent sent since the earlier controller last
        acknowledged, then the rest, until the agent answers that prompt.

        :raises RuntimeError: when no turn was in flight (or it was resumed already).
        """
        adopt, self._adopt = self._adopt, None
        if adopt is None:
            raise RuntimeError("no turn was in flight when this session was taken over")
        return TurnStream(self._turns, "", adopt=adopt)

    def turn(self, text: str) -> TurnStream:
        """A turn as an async context manager and iterator of events::

        async with session.turn("fix the build") as turn:
            async for event in turn:
                ...
        print(turn.result)
        """
        return TurnStream(self._turns, text)

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
        if (machine := self._state.inbox.turn) is not None:
            self._turns.cancel(machine)
        else:  # a turn that ended may still be waiting for its figures: it ends unmeasured
            self._figures.end_wait()

    def kill(self) -> None:
        """Stop at once: the turn in flight ends ``turn_cancelled`` now, without waiting for the
        runtime, and teardown skips the graceful window (the agent's tree is killed right away).
        For a second Ctrl-C, or an outer deadline that has no time left."""
        self._state.grace_s = 0.0
        if (machine := self._state.inbox.turn) is not None:
            machine.stop(Ending.cancelled("the turn was stopped at once"))
            self._turns.settle(machine)

    async def aclose(self, *, grace_ms: int | None = None) -> None:
        """Tear the session down from any task (also the one a pool closes warm sessions from).

        A turn still running in another task ends at once (``turn_cancelled``). Teardown takes
        at most ``stop_grace_ms`` (or ``grace_ms``) plus about a second; ``grace_ms=0`` kills the
        agent's tree without a graceful window.
        """
        if grace_ms is not None:
            self._state.grace_s = min(self._state.grace_s, max(0, grace_ms) / 1000)
        await self._closing.close()

    # -- for the entry points below, and for tests and benchmarks that look inside -----------

    @property
    def _inbox(self) -> Inbox:
        return self._state.inbox

    @property
    def _conn(self) -> AgentConnection | None:
        return self._state.conn

    @property
    def _process(self) -> AgentEnd | None:
        return self._state.process

    async def _start(self, tg: anyio.abc.TaskGroup) -> None:
        plan = await startup.prepare(self._state, tg, verification=self._verification)
        tg.start_soon(self._oversight.run, name="remote-acp turn oversight")
        tg.start_soon(self._closing.guard, name="remote-acp session guard")
        if self._attach is not None:
            await attaching.attach(self._state, plan, tg, self._attach)
            return
        await startup.launch(
            self._state,
            plan,
            tg,
            verification=self._verification,
            resume_id=self._resume_id,
            ledger=self._ledger,
        )


async def start_session(
    task_group: anyio.abc.TaskGroup,
    workspace: str,
    options: SessionOptions,
    target: LaunchTarget | None = None,
    *,
    resume: str | None = None,
    ledger: OriginLedger = ORIGINS,
    attach: SessionHandle | None = None,
) -> Session:
    """Start a session whose tasks run in ``task_group``; close it with :meth:`Session.aclose`
    from any task (the group ends once it is closed). For pools of warm sessions and schedulers
    that own their task groups; :func:`open_session` is the same as a context manager.

    :raises RemoteAcpError: with the start-up error kinds (see :func:`open_session`). The agent
        is torn down before the error is raised.
    """
    session = Session(target or LocalTarget(), workspace, options, resume_id=resume, ledger=ledger, attach=attach)
    return await _started(session, task_group)


@asynccontextmanager
async def open_session(
    workspace: str,
    options: SessionOptions,
    target: LaunchTarget | None = None,
    *,
    resume: str | None = None,
    ledger: OriginLedger = ORIGINS,
    attach: SessionHandle | None = None,
) -> AsyncIterator[Session]:
    """Launch the agent on ``target`` (local by default), start an ACP session, stop it on exit.

    ``resume``: a session id saved from an earlier run, continued by the route the agent
    advertises (``session/load``, else ``session/resume``) or, when that cannot be confirmed, a
    new session (``session.info.obtained`` says which; the first turn carries a notice).
    ``ledger``: where this process's session creation times are kept (for the load spacing).
    ``attach``: take this detached session over instead of starting one (``target`` must be an
    ssh target with a reattach window that names it: :func:`remote_acp.attach_session` builds both).

    Leaving the block tears the session down: a turn left running is settled within
    ``read_timeout_ms``, then teardown takes at most ``stop_grace_ms`` plus about a second. A
    caller with an outer deadline bounds both by calling :meth:`Session.kill` (or
    ``aclose(grace_ms=0)``) first.

    :raises RemoteAcpError: with the start-up error kinds (``agent_not_found``,
        ``invalid_workspace_cwd``, ``port_exit``, ``response_error``, ``response_timeout``,
        ``credential_unverified``). The agent is torn down before the error is raised.
    """
    session = Session(target or LocalTarget(), workspace, options, resume_id=resume, ledger=ledger, attach=attach)
    async with _opened(session) as opened:
        yield opened


def open_verification_session(
    workspace: str, options: SessionOptions, target: LaunchTarget | None = None
) -> contextlib.AbstractAsyncContextManager[Session]:
    """:func:`open_session` for a session that only proves the agent's credential (see
    :func:`remote_acp.session.verification.verify_credentials`): it delivers no tool servers, and
    teardown deletes it when the agent advertises ``session/delete``."""
    return _opened(Session(target or LocalTarget(), workspace, options, verification=True))


async def _started(session: Session, task_group: anyio.abc.TaskGroup) -> Session:
    try:
        await session._start(task_group)
    except BaseException as exc:
        await session.aclose()
        state = session._state
        if state.process is not None and isinstance(exc, RemoteAcpError):
            # The tail was masked as it was kept (teardown has unregistered the secrets since).
            for line in state.process.stderr_tail.lines():
                state.log.warning("agent stderr: %s", line)
        if isinstance(exc, RemoteAcpError):
            known = _start_facts(state, exc)
            if known:
                raise exc.with_facts(**known) from exc.__cause__
        raise
    return session


def _start_facts(state: SessionState, error: RemoteAcpError) -> dict[str, str]:
    """What the start knew that ``error`` does not say: the host it failed on (whatever failed),
    and the agent's name and version once ``initialize`` answered."""
    known: dict[str, str] = {}
    if error.facts.destination is None and state.target.remote:
        known["destination"] = state.target.label
    agent = state.agent
    if agent is not None and error.facts.agent_name is None:
        known["agent_name"] = agent.name
        if agent.version:
            known["agent_version"] = agent.version
    return known


@asynccontextmanager
async def _opened(session: Session) -> AsyncIterator[Session]:
    """``session`` started in a task group of its own, torn down when the block is left."""
    failure: BaseException | None = None
    body_error: BaseException | None = None
    teardown_error: BaseException | None = None
    async with anyio.create_task_group() as tg:
        try:
            await _started(session, tg)
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
                    await session.aclose()
                except BaseException as exc:  # a bug in teardown: surfaced, unwrapped, after cleanup
                    teardown_error = exc
                tg.cancel_scope.cancel()
    if body_error is not None:
        raise body_error
    if teardown_error is not None:
        raise teardown_error
    if failure is not None:
        raise failure
