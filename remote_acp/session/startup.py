"""Starting a session: from the options to a session id the first turn can use.

Start-up runs in two steps, so the session's own tasks start between them:

1. :func:`prepare` plans the tool servers (read and checked before anything is launched; none
   on a remote launch), has the target build its launch spec, registers every value known to be
   secret for masking, and serves files when the options and the remote rules allow it.
2. :func:`launch` starts the agent and performs ``initialize``, restarting it while a
   measurement source asks to settle (see :mod:`remote_acp.measure`); then declares what the
   session can deliver (its capabilities, only ever lowered from here on), and obtains the
   session: ``session/new``, or a continuation of ``resume_id``
   (:mod:`remote_acp.session.continuation`).

Everything it learns goes into the :class:`~remote_acp.session.state.SessionState`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import masking
from ..mcp import plan_delivery
from ..measure import Measurement
from ..targets.process.agent import AgentProcess
from .agent_watch import watch_agent
from .capabilities import Capability, CapabilityRecord
from .connection import AgentConnection
from .continuation import Continuation, continue_session, route_for
from .filesystem import FileServer, file_access
from .handshake import Handshake, close_method, method_ids
from .remote_rules import rules_for
from .state import SessionInfo
from .teardown import stop_agent, stop_started_after_close

if TYPE_CHECKING:
    import anyio.abc

    from ..mcp import Delivery
    from ..protocol.wire import InitializeResult
    from ..targets.launch import LaunchSpec
    from .continuation import OriginLedger
    from .filesystem import FileAccess
    from .state import SessionState

__all__ = ["Plan", "launch", "prepare"]


@dataclass(frozen=True, slots=True)
class Plan:
    """What :func:`prepare` settled before the agent is launched."""

    spec: LaunchSpec
    tools: Delivery
    files: FileAccess


async def prepare(state: SessionState, tg: anyio.abc.TaskGroup, *, verification: bool) -> Plan:
    """Plan the launch; a verification session delivers no tool servers."""
    options, target = state.options, state.target
    tools = plan_delivery(options, rules_for(target.remote), verification=verification)
    spec = await target.prepare(options.command, state.workspace)
    # Every value known to be secret is masked in all this session lets out, logs included.
    secrets = state.secrets = (*spec.secrets, *tools.secrets)
    # The stderr tail masks with the spec's secrets: the tool servers' (the agent's children,
    # sharing its stderr) are among them.
    spec = dataclasses.replace(spec, secrets=tuple(sorted(set(secrets), key=len, reverse=True)))
    masking.register(secrets)
    state.normalizer.secrets = secrets
    files = file_access(options, remote=target.remote)
    if files.enabled:
        state.inbox.serve_files(FileServer(state.workspace, files), tg)
    return Plan(spec, tools, files)


async def launch(
    state: SessionState,
    plan: Plan,
    tg: anyio.abc.TaskGroup,
    *,
    verification: bool,
    resume_id: str | None,
    ledger: OriginLedger,
) -> None:
    """Launch the agent as ``plan`` says and obtain the session."""
    options, target, spec = state.options, state.target, plan.spec
    measurement = state.measurement = Measurement(
        spec.argv, allowed=rules_for(target.remote).measurement, log=state.log
    )
    while True:  # restart to settle the measurement source (see remote_acp.measure)
        armed = measurement.arm_start()
        hs, init = await _start_agent(state, dataclasses.replace(spec, env=spec.env | armed), plan.files, tg)
        name = init.agent_info.name if init.agent_info else ""
        if not measurement.settle(name):
            break
        state.log.info("restarting the agent to settle the measurement source", extra={"agent_name": name})
        assert state.conn is not None and state.process is not None  # set by _start_agent
        await stop_agent(
            state.conn,
            state.process,
            grace_s=state.grace_s,
            drain_s=options.output_drain_ms / 1000,
            close=None,
            log=state.log,
        )
    # Declared before the first turn, so nothing has been lowered yet.
    capabilities = state.capabilities = CapabilityRecord(remote=target.remote, measured=measurement.measured)
    if not measurement.measured:
        state.log.info("token counts not measured", extra={"reason": measurement.why_not})
    rendered = plan.tools.render(init, state.log)
    hs.mcp_servers = rendered.servers
    for why in rendered.withheld:
        capabilities.lower(Capability.TOOL_SERVERS, why)
    agent = state.agent = init.agent_info
    if agent is None:
        capabilities.lower(Capability.AGENT_VERSION, "initialize carried no agentInfo")
    if route_for(init) is None:
        capabilities.lower(
            Capability.SESSION_CONTINUATION, "the handshake advertises neither session/load nor session/resume"
        )
    state.close_method = close_method(init, verification=verification)
    state.auth_hint = hs.auth_hint
    continuation = await _obtain(state, hs, init, resume_id=resume_id, ledger=ledger)
    session_id = continuation.session_id
    state.normalizer.session_id = session_id
    state.log.bind(session_id=session_id)
    process = state.process
    assert process is not None  # set by _start_agent
    info = state.info = SessionInfo(
        session_id=session_id,
        pid=process.pid,
        target=target.label,
        workspace=state.workspace,
        agent_name=agent.name if agent else "",
        agent_version=agent.version if agent else "",
        agent_capabilities=init.agent_capabilities,
        obtained=continuation.obtained,
        auth_methods=method_ids(init.auth_methods),
        measured=measurement.measured,
    )
    state.log.info("agent implementation", extra={"agent_name": info.agent_name, "agent_version": info.agent_version})


async def _start_agent(
    state: SessionState, spec: LaunchSpec, files: FileAccess, tg: anyio.abc.TaskGroup
) -> tuple[Handshake, InitializeResult]:
    """One start of the agent, up to its ``initialize`` answer."""
    options = state.options
    async with state.target.start_slot():  # a host's limit on connection attempts in progress
        start = spec.starter or AgentProcess.start
        state.process = process = await start(spec, stderr_tail_bytes=options.stderr_tail_bytes)
        if state.closing:  # closed while it started: the session's teardown has run without it
            await stop_started_after_close(process)
        process.watch_link(state.inbox)
        state.log.bind(pid=process.pid)
        state.normalizer.pid = process.pid
        conn = state.conn = state.inbox.conn = AgentConnection(
            process, state.inbox, max_line_bytes=options.max_line_bytes, prelude=spec.prelude
        )
        conn.start(tg, *watch_agent(conn, process, output_drain_ms=options.output_drain_ms))
        hs = Handshake(conn, process, state.target, drain_ms=options.output_drain_ms, secrets=state.secrets or ())
        init = await hs.initialize(
            options.read_timeout_ms, options.initialize_floor_ms, fs_read=files.read, fs_write=files.write
        )
    return hs, init


async def _obtain(
    state: SessionState, hs: Handshake, init: InitializeResult, *, resume_id: str | None, ledger: OriginLedger
) -> Continuation:
    """A new session, or ``resume_id`` continued (a new one, with a notice, when it cannot be)."""
    if not resume_id:
        session_id = await hs.new_session(state.workspace, state.options.read_timeout_ms)
        ledger.record(state.workspace, session_id)
        return Continuation("new", session_id)
    continuation = await continue_session(
        hs,
        init,
        resume_id=resume_id,
        cwd=state.workspace,
        normalizer=state.normalizer,
        activity=state.inbox.next_activity,
        capabilities=state.capabilities,
        ledger=ledger,
        read_timeout_ms=state.options.read_timeout_ms,
    )
    if continuation.obtained == "fell back":
        state.inbox.notice(
            f"could not continue session {resume_id} ({continuation.reason}); started a new session instead"
        )
    return continuation
