"""Taking a detached session over from another process: :func:`attach_session`.

Its own module so that only a process that attaches loads the ssh target through it (a local
run loads no ssh module).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ..targets.ssh.relink import SessionRef
from ..targets.ssh.settings import SshSettings
from ..targets.ssh.target import SshTarget
from .core import open_session, start_session

if TYPE_CHECKING:
    import contextlib

    import anyio.abc

    from ..options import SessionOptions
    from .core import Session
    from .handle import SessionHandle

__all__ = ["attach_session", "attach_target", "start_attached"]


def attach_target(handle: SessionHandle, settings: SshSettings | None = None) -> SshTarget:
    """The ssh target that takes ``handle``'s session over: ``settings`` (the ones the session was
    started with: its host key policy, keepalives...) with the handle's window, and its ssh_config
    unless ``settings`` names one."""
    chosen = dataclasses.replace(settings or SshSettings(), reattach_window_s=handle.window_s)
    if chosen.config_file is None and handle.config_file is not None:
        chosen = dataclasses.replace(chosen, config_file=handle.config_file)
    return SshTarget(handle.host, chosen, reattach=SessionRef(handle.relay_id, handle.secret))


def attach_session(
    handle: SessionHandle, options: SessionOptions, settings: SshSettings | None = None
) -> contextlib.AbstractAsyncContextManager[Session]:
    """Take the detached session ``handle`` names over, as :func:`~remote_acp.open_session` starts
    one: leaving the block ends it (detach it again with :meth:`Session.detach`). What the agent
    sent since the earlier controller last had it comes first; a turn that was in flight is
    taken over with :meth:`Session.resume_turn`. ``options``: this controller's (its bounds; the
    agent command is the running agent's and is not used).

    :raises RemoteAcpError: ``session_expired`` (its window ended, or it ended), ``not_owner``
        (the secret does not match), ``attached_elsewhere`` (another controller holds it),
        ``offset_lost``, or a connection failure as for any ssh start.
    """
    return open_session(handle.workspace, options, attach_target(handle, settings), attach=handle)


async def start_attached(
    task_group: anyio.abc.TaskGroup,
    handle: SessionHandle,
    options: SessionOptions,
    settings: SshSettings | None = None,
) -> Session:
    """:func:`attach_session` for a caller that owns its task group (as :func:`~remote_acp.start_session`)."""
    return await start_session(task_group, handle.workspace, options, attach_target(handle, settings), attach=handle)
