"""How an ended ssh is read: which exits are connection failures, which are the remote script's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ..errors import ErrorKind, RemoteAcpError
from .ssh_script import EXIT_NO_WORKSPACE, SIGNAL_MARK, WORKSPACE_MARK

if TYPE_CHECKING:
    from .exit_status import ExitStatus

__all__ = ["SSH_FAILED", "ssh_exit_error"]

SSH_FAILED: Final = 255


def ssh_exit_error(label: str, status: ExitStatus, *, agent_wrote: bool, stderr: str) -> RemoteAcpError | None:
    """The error for an ssh to ``label`` that ended with ``status``, or ``None`` when the session
    core's generic reading applies (see :meth:`remote_acp.targets.launch.LaunchTarget.exit_error`)."""
    if status.code == SSH_FAILED and not agent_wrote:
        return RemoteAcpError(ErrorKind.PORT_EXIT, "ssh connection failed", detail=stderr)
    if status.code == EXIT_NO_WORKSPACE and WORKSPACE_MARK in stderr:
        return RemoteAcpError(
            ErrorKind.INVALID_WORKSPACE_CWD,
            f"the workspace does not exist on {label} or cannot be entered",
            detail=stderr,
        )
    if status.code is not None and SIGNAL_MARK in stderr:
        return RemoteAcpError(
            ErrorKind.PORT_EXIT, f"the agent runtime on {label} was killed by a signal", detail=stderr
        )
    return None
