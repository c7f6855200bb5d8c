"""Why a session lost its agent, as a cause and facts, from how the process ended.

The same reading serves a start whose agent ended before answering and a turn whose agent ended
mid-way: killed by a signal (``agent_killed``: something outside killed it, a retry may do), an
exit status before it answered (``agent_exited``: it stopped of its own accord, and will again),
an exit status once it ran (``agent_lost``: a fresh session may not meet what ended it), or
nothing known (``agent_lost``). Over ssh the status is the local ``ssh``'s: 255 is ssh's own failure (the link
went), and the remote script reports an agent killed by signal N as 128+N (see
:mod:`remote_acp.targets.ssh.script`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from ..errors import Cause, ErrorFacts

if TYPE_CHECKING:
    from ..targets.agent_end import AgentEnd
    from ..targets.exit_status import ExitStatus

__all__ = ["Ended", "ended", "ended_cause", "exit_facts"]

_SSH_FAILED = 255
_REMOTE_SIGNALLED = range(129, 160)  # the remote script's 128+N, as it reports it


def ended_cause(status: ExitStatus | None, *, remote: bool, started: bool = False) -> Cause:
    """The cause of a connection lost with the process ending as ``status`` (``None``: unknown).

    ``started``: the agent had answered the handshake and ran turns. An agent that exits before
    it answers does so again on every start (``agent_exited``, not retryable); one that ran and
    then ended mid-session met something a fresh session may not (``agent_lost``, retryable).
    """
    if started and status is not None and status.signal is None and status.code != _SSH_FAILED:
        if not (remote and status.code in _REMOTE_SIGNALLED):
            return Cause.AGENT_LOST
    if status is None or (status.code is None and status.signal is None):
        return Cause.AGENT_LOST
    if status.signal is not None:
        return Cause.AGENT_KILLED
    if remote and status.code == _SSH_FAILED:
        return Cause.LINK_LOST
    if remote and status.code in _REMOTE_SIGNALLED:
        return Cause.AGENT_KILLED
    return Cause.AGENT_EXITED


def exit_facts(status: ExitStatus | None) -> ErrorFacts:
    """The exit status and signal of ``status``, as facts."""
    if status is None:
        return ErrorFacts()
    return ErrorFacts(exit_status=status.code, signal=status.signal)


@dataclass(frozen=True, slots=True)
class Ended:
    """How the agent process ended: the report a person reads, its cause and facts."""

    detail: str
    cause: Cause
    facts: ErrorFacts
    message: str | None = None
    """Why, when the agent's end knows better than its exit status (a lost reattach window)."""


async def ended(process: AgentEnd | None, *, wait_s: float, remote: bool, started: bool = False) -> Ended:
    """Wait up to ``wait_s`` for ``process`` to be reaped, then read how it ended (its exit
    status and the masked end of its stderr)."""
    if process is None:
        return Ended("", Cause.AGENT_LOST, ErrorFacts())
    with anyio.move_on_after(wait_s):
        await process.exited.wait()
    if (lost := process.lost_error) is not None:
        return Ended(lost.detail or "", lost.cause, lost.facts, lost.message)
    status = process.exit_status
    if status is None:
        return Ended("", Cause.AGENT_LOST, ErrorFacts())
    detail = f"{status.describe()}; stderr: {process.stderr_tail.report()}"
    return Ended(detail, ended_cause(status, remote=remote, started=started), exit_facts(status))
