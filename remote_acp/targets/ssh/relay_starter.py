"""What starts a session's agent end when it has a reattach window (a spec's
:attr:`~remote_acp.targets.launch.LaunchSpec.starter`): the first ssh, wrapped in a
:class:`~.relayed_agent.RelayedAgent`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..process.agent import AgentProcess
from .relayed_agent import RelayedAgent
from .relink import SessionRef

if TYPE_CHECKING:
    from ..launch import LaunchSpec
    from .relink import Relink

__all__ = ["RelayStarter"]


class RelayStarter:
    """Starts a :class:`RelayedAgent` (a spec's :attr:`~remote_acp.targets.launch.LaunchSpec.starter`):
    a new session on the host, or, given ``ref``, the takeover of a detached one."""

    def __init__(self, relink: Relink, ref: SessionRef | None = None) -> None:
        self.relink = relink
        self.ref = ref

    async def __call__(self, spec: LaunchSpec, *, stderr_tail_bytes: int) -> RelayedAgent:
        process = await AgentProcess.start(spec, stderr_tail_bytes=stderr_tail_bytes)
        ref, resume = self.ref or SessionRef.new(), self.ref is not None
        return RelayedAgent(process, self.relink, ref, resume=resume, tail_bytes=stderr_tail_bytes)
