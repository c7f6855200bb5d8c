"""How an ssh that ended during start-up is read: the cause, whether a retry can help, the fix.

ssh exits 255 for every failure of its own, and a remote command's status otherwise, so the
status alone says little. ssh runs at ``LogLevel VERBOSE`` (:mod:`remote_acp.targets.ssh_argv`),
which prints its reasons (``Timeout, server ... not responding`` needs ``INFO``) and, once the
server accepted the login, ``Authenticated to HOST ... using "publickey".``: that line splits a
failed connection (before it) from a login that did not run the session's command (after it).

Permanent problems are not retryable (a retry meets the same refusal): a changed or unknown host
key under a strict policy, refused authentication, an ssh_config ssh refuses, a ``RemoteCommand``
conflict, a login shell that runs no command (``/bin/false``, ``nologin``), a restricted shell,
a ``ForceCommand`` that is not ours, a login script that reads the session script off stdin, and
an agent or a supervisor tool missing on the host (``agent_not_found``, as for a local launch).
A refused or timed-out connection, a name that does not resolve and a lost connection stay
``port_exit`` and retryable. Every message quotes ssh's own reason, or leaves it to the detail:
the masked standard-error tail.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from ..errors import ErrorKind, RemoteAcpError
from .ssh_script import (
    AT_CAPACITY_MARK,
    EXIT_AT_CAPACITY,
    EXIT_INCOMPLETE,
    EXIT_NO_SLOTS,
    EXIT_NO_TOOL,
    EXIT_NO_WORKSPACE,
    INCOMPLETE_MARK,
    SIGNAL_MARK,
    SLOTS_MARK,
    TOOL_MARK,
    WORKSPACE_MARK,
)

if TYPE_CHECKING:
    from .exit_status import ExitStatus

__all__ = ["SSH_FAILED", "authenticated", "ssh_exit_error", "ssh_ready_error", "ssh_reason"]

SSH_FAILED: Final = 255
EXIT_NOT_FOUND: Final = 127
EXIT_NOT_EXECUTABLE: Final = 126
AUTHENTICATED: Final = "Authenticated to "
# ssh's own lines at VERBOSE that explain nothing about a failure.
_CHATTER: Final = re.compile(
    r"^(Authenticated to |Transferred: sent |Bytes per second: |Warning: Permanently added |@|  remove with:)"
)
_LOGIN_REFUSED_HINT: Final = (
    "the account's login shell runs no command (/bin/false, nologin) or sshd_config forces another "
    "command (ForceCommand); the session needs a login shell that runs the command it is given"
)


def authenticated(stderr: str) -> bool:
    """Whether ssh said the server accepted the login (its ``VERBOSE`` line)."""
    return any(line.startswith(AUTHENTICATED) for line in _lines(stderr))


def ssh_reason(stderr: str) -> str:
    """ssh's (or the login's) last line that explains something, or ``""``."""
    for line in reversed(_lines(stderr)):
        if not _CHATTER.match(line):
            return line.removeprefix("ssh: ")
    return ""


def _lines(stderr: str) -> list[str]:
    # The tail as StderrTail.report() renders it: lines joined by " | ".
    text = stderr.removeprefix("[earlier output omitted] ")
    return [line.strip() for line in text.split(" | ") if line.strip()]


def ssh_exit_error(
    label: str, status: ExitStatus, *, agent_wrote: bool, stderr: str, ready: bool | None = None
) -> RemoteAcpError | None:
    """The error for an ssh to ``label`` that ended with ``status`` before the session started,
    or ``None`` when the session core's generic reading applies (see
    :meth:`remote_acp.targets.launch.LaunchTarget.exit_error`).

    ``agent_wrote``: something arrived on stdout. ``ready``: whether the remote side printed its
    ready marker, when the launch has one (``None``: unknown); a login that ended before it ran
    something other than the session's command.
    """
    code = status.code
    if code == EXIT_NO_WORKSPACE and WORKSPACE_MARK in stderr:
        return RemoteAcpError(
            ErrorKind.INVALID_WORKSPACE_CWD,
            f"the workspace does not exist on {label} or cannot be entered",
            detail=stderr,
        )
    if code == EXIT_NO_TOOL and TOOL_MARK in stderr:
        tool = _after(stderr, TOOL_MARK)
        return RemoteAcpError(
            ErrorKind.AGENT_NOT_FOUND,
            f"{label} lacks {tool}, which the session's supervisor needs: install it there; nothing was started",
            detail=stderr,
        )
    if code == EXIT_AT_CAPACITY and AT_CAPACITY_MARK in stderr:
        slots = _after(stderr, AT_CAPACITY_MARK)
        # Retryable: a slot frees when a session there ends; a scheduler tries another host.
        return RemoteAcpError(
            ErrorKind.PORT_EXIT,
            f"{label} is at capacity: all {slots} of its agent slots are held by running sessions; nothing was started",
            detail=stderr,
        )
    if code == EXIT_NO_SLOTS and SLOTS_MARK in stderr:
        return RemoteAcpError(
            ErrorKind.PORT_EXIT,
            f"the agent slots directory {_after(stderr, SLOTS_MARK)} on {label} is not usable: it must be a "
            "directory the user owns and no link; remove whatever is in its place",
            detail=stderr,
            retryable=False,
        )
    if code == EXIT_INCOMPLETE and INCOMPLETE_MARK in stderr:
        return RemoteAcpError(
            ErrorKind.PORT_EXIT,
            f"the session script sent to {label} on standard input did not arrive whole: a login script "
            "(.bashrc, .profile, config.fish...) reads standard input; make it read nothing when standard "
            "input is not a terminal",
            detail=stderr,
            retryable=False,
        )
    if code is not None and SIGNAL_MARK in stderr:
        return RemoteAcpError(
            ErrorKind.PORT_EXIT, f"the agent runtime on {label} was killed by a signal", detail=stderr
        )
    logged_in = authenticated(stderr)
    reason = ssh_reason(stderr)
    if code == SSH_FAILED and not logged_in and not agent_wrote:
        return _connection_error(label, reason, stderr)
    if not logged_in:
        return None
    if "restricted" in reason and code == 1:
        return RemoteAcpError(
            ErrorKind.PORT_EXIT,
            f"the login shell on {label} is a restricted shell, which refuses the session's command "
            f"({reason}): give the account an unrestricted shell",
            detail=stderr,
            retryable=False,
        )
    if code in (EXIT_NOT_FOUND, EXIT_NOT_EXECUTABLE) and (ready is not False):
        what = "was not found" if code == EXIT_NOT_FOUND else "cannot be run"
        return RemoteAcpError(
            ErrorKind.AGENT_NOT_FOUND,
            f"the agent command {what} on {label}"
            + (f" ({reason})" if reason else "")
            + ": install it there, or give its full path (a non-interactive login does not read "
            "~/.profile, so its PATH may be shorter than an interactive one's)",
            detail=stderr,
        )
    if ready is False or (ready is None and not agent_wrote and code == 1 and not reason):
        said = f" ({reason})" if reason else ""
        return RemoteAcpError(
            ErrorKind.PORT_EXIT,
            f"the login on {label} ended with {status.describe()} before the session's command "
            f"started{said}: {_LOGIN_REFUSED_HINT}",
            detail=stderr,
            retryable=False,
        )
    return None


def _after(stderr: str, mark: str) -> str:
    """The word(s) the script printed after ``mark``, on that line of the tail."""
    return stderr.split(mark, 1)[1].split(" | ", 1)[0].strip()


def _connection_error(label: str, reason: str, stderr: str) -> RemoteAcpError:
    """ssh failed before the server accepted the login."""
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in stderr or "has changed and you have requested" in stderr:
        fix = re.search(r"ssh-keygen -f (.+?) -R (\S+)", stderr)
        remove = f"`ssh-keygen -f {fix[1]} -R {fix[2]}`" if fix else "`ssh-keygen -R HOST`"
        return _permanent(
            f"the host key of {label} has changed: it may be an attack, or the host was reinstalled; "
            f"once you know which, remove the old key with {remove} (the next connection accepts "
            "the new one under the default policy)",
            stderr,
        )
    if "Host key verification failed" in stderr:
        return _permanent(
            f"the host key of {label} is not known, and the host key policy (yes, or ask in the "
            "ssh_config) refuses an unknown key: add it to known_hosts (ssh-keyscan, checked "
            "against the host), or use the accept-new policy",
            stderr,
        )
    if "Permission denied" in stderr:
        return _permanent(
            f"{label} refused the authentication ({reason}): check the user name and that the key "
            "(IdentityFile, or one in ssh-agent) is in the account's authorized_keys; ssh runs with "
            "BatchMode, so a key with a passphrase needs ssh-agent",
            stderr,
        )
    if "Cannot execute command-line and remote command" in stderr:
        return _permanent(
            f"the ssh_config sets a RemoteCommand for {label}, which conflicts with the session's "
            "command: remove it for this host (this ssh does not know RemoteCommand=none, which "
            "would override it)",
            stderr,
        )
    if "Bad configuration option" in stderr or "Bad owner or permissions" in stderr or "line 0:" in stderr:
        return _permanent(f"ssh refused its configuration for {label}: {reason}", stderr)
    # Refused, timed out, unresolved, reset: a retry can succeed. ssh's reason is the detail.
    return RemoteAcpError(ErrorKind.PORT_EXIT, "ssh connection failed", detail=stderr)


def _permanent(message: str, stderr: str) -> RemoteAcpError:
    return RemoteAcpError(ErrorKind.PORT_EXIT, message, detail=stderr, retryable=False)


def ssh_ready_error(label: str, bound_ms: int, *, stderr: str, printed: str) -> RemoteAcpError:
    """The error for an ssh to ``label`` whose remote side did not say it was ready within
    ``bound_ms`` (:func:`remote_acp.targets.ssh_argv.ready_bound_ms`). ``printed``: what came on
    stdout instead (masked).

    Before the server accepted the login, the connection setup did not complete (a server that
    stalls the key exchange, a network that drops packets): retryable. After it, the login hangs
    or does not run the session's command: not retryable.
    """
    reason = ssh_reason(stderr)
    said = f" ({reason})" if reason else ""
    if not authenticated(stderr):
        return RemoteAcpError(
            ErrorKind.PORT_EXIT,
            f"the ssh connection setup to {label} did not complete in time: no login within {bound_ms} ms"
            f"{said}; the server accepted the connection but did not finish the key exchange or the "
            "authentication",
            detail=stderr,
        )
    return RemoteAcpError(
        ErrorKind.RESPONSE_TIMEOUT,
        f"the login on {label} did not start the session's command within {bound_ms} ms{said}: a login "
        "that hangs, a login script (.bashrc, .profile, config.fish...) that reads standard input or "
        "starts another shell, or a ForceCommand in sshd_config that runs something else",
        detail=f"it printed: {printed}" if printed else "it printed nothing",
        retryable=False,
    )
