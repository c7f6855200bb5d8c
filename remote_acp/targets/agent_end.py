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

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import anyio

    from ..errors import RemoteAcpError
    from .exit_status import ExitStatus
    from .stderr_tail import StderrTail

__all__ = ["AgentEnd", "LinkWatcher", "RelayRef"]


@dataclass(frozen=True, slots=True)
class RelayRef:
    """Where an end kept by a host's relay lives, and what proves it is ours: what a session's
    handle is made of (:class:`remote_acp.session.handle.SessionHandle`)."""

    destination: str
    """The ssh destination, as the target was given it."""
    relay_id: str
    secret: str = field(repr=False)
    window_s: int
    config_file: str | None = None
    """The ssh_config the session's ssh read (another process needs it to reach the host too)."""


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
    def linked(self) -> anyio.Event:
        """Set once the agent's output can flow: at once for a process; for an end kept by a relay,
        once the relay answered (or the end was lost: then :attr:`exited` is set too)."""
        ...

    @property
    def lost_error(self) -> RemoteAcpError | None:
        """Why the end was lost, when it knows better than an exit status can say (a detached
        session that expired); ``None`` otherwise."""
        ...

    @property
    def relay(self) -> RelayRef | None:
        """The relay that keeps this end on its host (``None``: a process with nothing to detach from)."""
        ...

    async def detach(self) -> bool:
        """Let go of the agent without ending it: its host keeps it for its window. ``False``:
        this end cannot be detached (it ends with its process)."""
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
