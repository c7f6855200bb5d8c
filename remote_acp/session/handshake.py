"""The start-up exchange: ``initialize`` and ``session/new``, and how each failure reads.

Every start-up call is bounded; one that is not answered in time names the bound it waited
(``read_timeout_ms``, or ``initialize_floor_ms`` when that decides ``initialize``'s wait) and how
to raise it. An error answer reads as at any call (:mod:`remote_acp.protocol.rpc_failure`):
``-32000`` is a refused credential, quoting the agent's own login instructions from
``initialize``'s ``authMethods``; another code is reported with its code, message and data. A
connection that ends before the answer is the *early exit report* when the runtime itself exited
(its exit status and the masked end of its stderr), or the launch target's own reading of that
exit (an ssh connection failure, a workspace missing on the host).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import anyio

from .._version import __version__
from ..errors import Cause, ErrorFacts, ErrorKind, RemoteAcpError
from ..masking import Masker
from ..protocol.rpc_failure import AUTH_REQUIRED, ERROR_TEXT_CAP, auth_hint, call_error
from ..protocol.wire import (
    PROTOCOL_VERSION,
    InitializeResult,
    WireError,
    initialize_params,
    new_session_params,
    parse_initialize,
    parse_new_session,
)
from .exits import ended_cause, exit_facts

if TYPE_CHECKING:
    from ..protocol.jsonrpc import Response
    from ..targets.agent_end import AgentEnd
    from ..targets.launch import LaunchTarget, Prelude
    from .connection import AgentConnection

__all__ = ["CREDENTIAL_REFUSED", "ERROR_TEXT_CAP", "Handshake", "close_method", "method_ids"]

CREDENTIAL_REFUSED: Final = AUTH_REQUIRED
_RAISE_READ = (
    "raise read_timeout_ms if the agent needs longer "
    "(--read-timeout-ms of remote-acp run, --handshake-timeout-ms of check host)"
)
_RAISE_FLOOR = "raise initialize_floor_ms (initialize waits the larger of it and read_timeout_ms)"


def close_method(init: InitializeResult, *, verification: bool) -> str | None:
    """How teardown ends the session through the protocol, if the handshake advertised a way:
    a verification session is deleted (else closed), any other one closed."""
    if verification and init.session_capability("delete"):
        return "session/delete"
    return "session/close" if init.session_capability("close") else None


def method_ids(methods: list[Any]) -> tuple[str, ...]:
    """The ids of the advertised auth methods, bounded (an agent may send anything there)."""
    ids = (m.get("id") for m in methods[:32] if isinstance(m, dict))
    return tuple(i[:100] for i in ids if isinstance(i, str))


class Handshake:
    """Bounded start-up requests on one connection."""

    def __init__(
        self,
        conn: AgentConnection,
        process: AgentEnd,
        target: LaunchTarget,
        *,
        drain_ms: int,
        secrets: tuple[str, ...] = (),
    ) -> None:
        self._conn = conn
        self._process = process
        self._target = target
        self._drain_s = drain_ms / 1000
        self._masker = Masker(secrets)
        self.mcp_servers: list[dict[str, Any]] = []
        """The rendered tool servers that ``session/new``, ``session/load`` and ``session/resume``
        carry; set once ``initialize`` has answered (what the agent can take depends on it)."""
        self.auth_hint = ""
        """The agent's login instructions from ``initialize`` (masked, bounded), passed on by
        the error of a refused credential (:func:`~remote_acp.protocol.rpc_failure.auth_hint`)."""

    async def request(self, method: str, params: dict[str, Any], timeout_ms: int) -> Response | None:
        """Send a request and wait for its answer; ``None`` on timeout.

        :raises RemoteAcpError: when the connection ends first (see :meth:`lost_error`); and
            ``credential_unverified`` for a ``-32000`` answer to a protocol method (whoever
            asks, a refused credential ends the start). A vendor method's (``_``-prefixed, such
            as the continuation's probe) is returned as it is: its code is the vendor's.
        """
        call = self._conn.call(method, params)
        with anyio.move_on_after(timeout_ms / 1000):
            await call.ticket.done.wait()
            if not call.ticket.failed:
                await call.done.wait()
        if call.unreadable is not None:
            raise RemoteAcpError(
                ErrorKind.RESPONSE_ERROR,
                f"the agent's answer to {method} could not be read: {call.unreadable}",
                cause=Cause.PROTOCOL_VIOLATION,
            )
        if call.ticket.failed or (call.done.is_set() and call.response is None):
            self._conn.abandon(call)
            raise await self.lost_error()  # the agent stopped reading, or its connection ended
        if not call.done.is_set():
            self._conn.abandon(call)
            return None
        response = call.response
        error = response.error if response is not None else None
        if error is not None and error.code == AUTH_REQUIRED and not method.startswith("_"):
            raise call_error(method, error, self._masker, hint=self.auth_hint)
        return response

    async def call(
        self, method: str, params: dict[str, Any], timeout_ms: int, *, bound: str = "read_timeout_ms"
    ) -> Any:
        """A start-up request: its result, or the error start-up reports. ``bound``: the name of
        the option that set ``timeout_ms``, which a timeout names with how to raise it."""
        response = await self.request(method, params, timeout_ms)
        if response is None:
            how = _RAISE_FLOOR if bound == "initialize_floor_ms" else _RAISE_READ
            raise RemoteAcpError(
                ErrorKind.RESPONSE_TIMEOUT,
                f"timed out waiting for the agent to answer {method}: no answer within {bound} "
                f"({timeout_ms} ms); {how}",
                cause=Cause.NO_ANSWER,
                facts=ErrorFacts(bound_ms=timeout_ms),
            )
        if response.error is not None:
            raise call_error(method, response.error, self._masker, hint=self.auth_hint)
        return response.result

    async def initialize(
        self, read_timeout_ms: int, floor_ms: int = 0, *, fs_read: bool = False, fs_write: bool = False
    ) -> InitializeResult:
        """``initialize`` waits the larger of ``read_timeout_ms`` and ``floor_ms`` (some
        runtimes start slowly). ``fs_read``/``fs_write``: the file-system capabilities to
        advertise (the remote rules have been applied by the caller)."""
        timeout_ms = max(read_timeout_ms, floor_ms)
        bound = "initialize_floor_ms" if floor_ms > read_timeout_ms else "read_timeout_ms"
        if (prelude := self._conn.prelude) is not None:
            await self.wait_ready(prelude, prelude.bound_ms or timeout_ms)
        params = initialize_params(__version__, fs_read=fs_read, fs_write=fs_write)
        raw = await self.call("initialize", params, timeout_ms, bound=bound)
        try:
            init = parse_initialize(raw)
        except WireError:
            raise RemoteAcpError(
                ErrorKind.RESPONSE_ERROR, "initialize response did not decode", cause=Cause.PROTOCOL_VIOLATION
            ) from None
        if init.protocol_version != PROTOCOL_VERSION:
            raise RemoteAcpError(
                ErrorKind.RESPONSE_ERROR,
                f"agent reported protocol version {init.protocol_version}, want {PROTOCOL_VERSION}",
                cause=Cause.PROTOCOL_INCOMPATIBLE,  # the same runtime answers the same version next time
            )
        self.auth_hint = auth_hint(init.auth_methods, self._masker)
        return init

    async def new_session(self, cwd: str, timeout_ms: int) -> str:
        """``session/new`` with :attr:`mcp_servers` (``mcpServers: []`` when there are none)."""
        raw = await self.call("session/new", new_session_params(cwd, self.mcp_servers), timeout_ms)
        try:
            return parse_new_session(raw)
        except WireError as exc:
            raise RemoteAcpError(
                ErrorKind.RESPONSE_ERROR, f"session/new response did not decode: {exc}", cause=Cause.PROTOCOL_VIOLATION
            ) from None

    async def wait_ready(self, prelude: Prelude, bound_ms: int) -> None:
        """Wait for the launched side to get through its prelude (a remote login done).

        :raises RemoteAcpError: the prelude's refusal; the connection's loss (with its exit
            report); or, when it is not ready in time, the prelude's reading of that (naming the
            likely cause and what it printed instead).
        """
        conn = self._conn
        with anyio.move_on_after(bound_ms / 1000):
            await conn.wait_ready()
        if conn.ready.is_set():
            return
        if conn.refusal is not None:
            raise conn.refusal
        if conn.lost.is_set():
            raise await self.lost_error()
        printed = self._masker.quote(conn.pre_ready_output.decode("utf-8", "replace").strip(), 300)
        raise prelude.not_ready_error(bound_ms, stderr=self._process.stderr_tail.report(), printed=printed)

    async def lost_error(self) -> RemoteAcpError:
        """The error for a connection lost before an answer."""
        process, conn = self._process, self._conn
        with anyio.move_on_after(self._drain_s):
            await process.exited.wait()
            await process.stderr_eof.wait()
        if process.lost_error is not None:
            return process.lost_error
        if conn.output_abandoned:
            return RemoteAcpError(ErrorKind.PORT_EXIT, conn.loss_message, cause=Cause.AGENT_LOST)
        status = process.exit_status
        if status is None:
            return RemoteAcpError(
                ErrorKind.PORT_EXIT, "agent connection ended before responding", cause=Cause.AGENT_LOST
            )
        stderr = process.stderr_tail.report()
        ready = conn.ready.is_set() if conn.prelude is not None else None
        special = self._target.exit_error(status, agent_wrote=conn.bytes_received > 0, stderr=stderr, ready=ready)
        if special is not None:
            return special
        return RemoteAcpError(
            ErrorKind.PORT_EXIT,
            f"the agent runtime exited before responding: {status.describe()}",
            detail=stderr,
            cause=ended_cause(status, remote=self._target.remote),
            facts=exit_facts(status),
        )
