"""The agent's end of a session, as the session sees it: pipes, an exit, and the teardown steps.

Two things have this shape. :class:`~remote_acp.targets.process.agent.AgentProcess` is one local
process (the agent itself, or the ``ssh`` that carries it). A session with a reattach window has
:class:`~remote_acp.targets.ssh.relayed_agent.RelayedAgent`, which outlives each ssh process it
runs: a lost link is reconnected underneath, and the session above sees one unbroken stream.
Everything above this layer (connection, handshake, turns, teardown) speaks only of
:class:`AgentEnd`; a launch spec says which kind to start
(:attr:`~remote_acp.targets.launch.LaunchSpec.starter`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import anyio

    from ..errors import RemoteAcpError
    from .exit_status import ExitStatus
    from .stderr_tail import StderrTail

__all__ = ["AgentEnd", "LinkWatcher"]


class LinkWatcher(Protocol):
    """Told when a session's link drops and when it is back (a reattach window's sessions only)."""

    def link_lost(self, reason: str) -> None: ...

    def link_restored(self, down_ms: int) -> None: ...


class AgentEnd(Protocol):
    """What a session needs of the agent's end (see the module docstring)."""

    @property
    def pid(self) -> int: ...
    @property
    def exit_status(self) -> ExitStatus | None: ...
    @property
    def exited(self) -> anyio.Event: ...
    @property
    def stdout_eof(self) -> anyio.Event:
        """Set by the connection's reader once stdout ended."""
        ...

    @property
    def stderr_eof(self) -> anyio.Event: ...
    @property
    def stderr_tail(self) -> StderrTail: ...

    @property
    def lost_error(self) -> RemoteAcpError | None:
        """Why the end was lost, when it knows better than an exit status can say (a detached
        session that expired); ``None`` otherwise."""
        ...

    def watch_link(self, watcher: LinkWatcher) -> None:
        """Tell ``watcher`` when the link drops and comes back (an end without a link never does)."""
        ...

    async def read_stdout(self) -> bytes: ...
    async def write_stdin(self, data: bytes) -> None: ...
    async def drain_stderr(self) -> None: ...
    async def watch_exit(self) -> None: ...
    def close_stdin(self) -> None: ...
    def close_stdout(self) -> None: ...
    async def terminate(self) -> None: ...
    async def kill(self, bound_s: float = ...) -> None: ...
    def signal_group(self, sig: int) -> None: ...
    async def kill_pipe_holders_off_loop(self) -> None: ...
    def reap(self) -> ExitStatus | None: ...
    def release(self) -> None: ...
