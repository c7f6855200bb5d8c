"""How an ssh that ended during start-up is read: the cause, whether a retry can help, the fix.

ssh exits 255 for every failure of its own, and a remote command's status otherwise, so the
status alone says little. ssh runs at ``LogLevel VERBOSE`` (:mod:`remote_acp.targets.ssh.argv`),
which prints its reasons (``Timeout, server ... not responding`` needs ``INFO``) and, once the
server accepted the login, ``Authenticated to HOST ... using "publickey".``: that line splits a
failed connection (before it) from a login that did not run the session's command (after it).

Each failure gets its :class:`~hostinv.causes.Cause` here, where it is recognised, with its facts
(destination, exit status, signal, ssh's reason line); whether a retry helps, the host verdict and
the fix follow from the cause (:data:`hostinv.causes.CAUSES`), so nothing downstream reads these
messages. The kinds stay the seeds': an ssh that exits 255 or 127 is ``port_exit`` (127 with the
cause ``agent_not_found``, not retryable), a missing workspace ``invalid_workspace_cwd``. Every
message quotes ssh's own reason, or leaves it to the detail: the masked standard-error tail.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from hostinv.causes import ssh_words

from ...errors import Cause, ErrorFacts, ErrorKind, RemoteAcpError, bounded_fact
from .loader import EXIT_INCOMPLETE, INCOMPLETE_MARK
from .relay.attach import is_relay_line
from .script import (
    AT_CAPACITY_MARK,
    EXIT_AT_CAPACITY,
    EXIT_NO_SLOTS,
    EXIT_NO_TOOL,
    EXIT_NO_WORKSPACE,
    SIGNAL_MARK,
    SLOTS_MARK,
    TOOL_MARK,
    WORKSPACE_MARK,
)

if TYPE_CHECKING:
    from ..exit_status import ExitStatus

__all__ = ["SSH_FAILED", "authenticated", "is_ssh_chatter", "ssh_exit_error", "ssh_ready_error", "ssh_reason"]

SSH_FAILED: Final = 255
EXIT_NOT_FOUND: Final = 127
EXIT_NOT_EXECUTABLE: Final = 126
AUTHENTICATED: Final = "Authenticated to "
# What ssh says on every connection at LogLevel VERBOSE (which we set for its reasons for a
# failure), on the first one to a host, and when it is ended: it explains nothing to a person.
_ROUTINE: Final = re.compile(
    r"(Authenticated to |Authenticated using |Transferred: sent |Bytes per second: |Warning: Permanently added "
    r"|Killed by signal \d+\.$)"
)
# Lines that are no reason either: the routine ones, and the frame of ssh's host-key warning.
_CHATTER: Final = re.compile(rf"^(?:{_ROUTINE.pattern}|@|  remove with:)")


def is_ssh_chatter(line: str) -> bool:
    """Whether ``line`` of ssh's stderr is its routine chatter, which the session keeps out of
    logs, error messages and details (ssh's reason lines stay); the readers of ssh's end still
    get it (:meth:`~remote_acp.targets.ssh.target.SshTarget.exit_error`)."""
    return _ROUTINE.match(line) is not None


# ssh's own words for its failures before login (it runs at LogLevel VERBOSE). Only this module
# reads them; what it decides is a cause.
_KEY_CHANGED: Final = ("REMOTE HOST IDENTIFICATION HAS CHANGED", "has changed and you have requested")
_KEYGEN_LINE: Final = re.compile(r"ssh-keygen -f (.+?) -R (\S+)")
_WORKSPACE_WHY: Final = {
    "missing": "does not exist",
    "not_dir": "is not a directory",
    "denied": "cannot be entered by the login user (no search permission)",
}
_UNRESOLVED: Final = ("Could not resolve hostname", "Name or service not known", "nodename nor servname")
_TIMED_OUT: Final = ("timed out", "not responding")


def authenticated(stderr: str) -> bool:
    """Whether ssh said the server accepted the login (its ``VERBOSE`` line)."""
    return any(line.startswith(AUTHENTICATED) for line in _lines(stderr))


def ssh_reason(stderr: str) -> str:
    """ssh's (or the login's) last line that explains something, or ``""`` (a relay's own lines
    explain nothing: the agent's stderr it reports before its end does)."""
    for line in reversed(_lines(stderr)):
        if not _CHATTER.match(line) and not is_relay_line(line):
            return line.removeprefix("ssh: ")
    return ""


def _lines(stderr: str) -> list[str]:
    # The tail as StderrTail.report() renders it: lines joined by " | ".
    text = stderr.removeprefix("[earlier output omitted] ")
    return [line.strip() for line in text.split(" | ") if line.strip()]


def ssh_exit_error(
    label: str,
    status: ExitStatus,
    *,
    agent_wrote: bool,
    stderr: str,
    ready: bool | None = None,
    config: str | None = None,
) -> RemoteAcpError | None:
    """The error for an ssh to ``label`` that ended with ``status`` before the session started,
    or ``None`` when the session core's generic reading applies (see
    :meth:`remote_acp.targets.launch.LaunchTarget.exit_error`).

    ``agent_wrote``: something arrived on stdout. ``ready``: whether the remote side printed its
    ready marker, when the launch has one (``None``: unknown); a login that ended before it ran
    something other than the session's command.
    """
    code = status.code
    reason = ssh_reason(stderr)
    facts = ErrorFacts(
        destination=label,
        exit_status=code,
        signal=status.signal,
        ssh_reason=bounded_fact(reason) if reason else None,
        ssh_target=_ssh_target(label, config),
    )

    def error(kind: ErrorKind, cause: Cause, message: str, **more: Any) -> RemoteAcpError:
        return RemoteAcpError(kind, message, detail=stderr, cause=cause, facts=replace(facts, **more))

    if code == EXIT_NO_WORKSPACE and WORKSPACE_MARK in stderr:
        why, _, workspace = _after(stderr, WORKSPACE_MARK).partition(" ")
        said = _WORKSPACE_WHY.get(why)
        if said is None:  # an older script's line: the path alone
            why, workspace, said = "", _after(stderr, WORKSPACE_MARK), "does not exist or cannot be entered"
        return error(
            ErrorKind.INVALID_WORKSPACE_CWD,
            Cause.WORKSPACE_INVALID,
            f"the workspace {workspace} {said} on {label}",
            workspace=workspace,
        )
    if code == EXIT_NO_TOOL and TOOL_MARK in stderr:
        tool = _after(stderr, TOOL_MARK)
        return error(
            ErrorKind.AGENT_NOT_FOUND,
            Cause.TOOL_MISSING,
            f"{label} lacks {tool}, which the session's supervisor needs; nothing was started",
            tool=tool,
        )
    if code == EXIT_AT_CAPACITY and AT_CAPACITY_MARK in stderr:
        slots = _after(stderr, AT_CAPACITY_MARK)
        return error(
            ErrorKind.PORT_EXIT,
            Cause.AT_CAPACITY,
            f"{label} is at capacity: all {slots} of its agent slots are held by running sessions; nothing was started",
        )
    if code == EXIT_NO_SLOTS and SLOTS_MARK in stderr:
        where = _after(stderr, SLOTS_MARK)
        return error(
            ErrorKind.PORT_EXIT,
            Cause.SLOTS_UNUSABLE,
            f"the agent slots directory {where} on {label} is not usable: it must be a directory the user "
            "owns and no link",
            slot_dir=where,
        )
    if code == EXIT_INCOMPLETE and INCOMPLETE_MARK in stderr:
        return error(
            ErrorKind.PORT_EXIT,
            Cause.LOGIN_READS_STDIN,
            f"the session script sent to {label} on standard input did not arrive whole: a login script "
            "reads standard input",
        )
    if code is not None and SIGNAL_MARK in stderr:
        return error(ErrorKind.PORT_EXIT, Cause.AGENT_KILLED, f"the agent runtime on {label} was killed by a signal")
    logged_in = authenticated(stderr)
    if code == SSH_FAILED and not logged_in and not agent_wrote:
        return _connection_error(label, reason, stderr, facts)
    if not logged_in:
        return None
    # (once the ready marker came, the session's command ran: its words are the agent's, not the shell's)
    if "restricted" in reason and code == 1 and ready is not True:
        return error(
            ErrorKind.PORT_EXIT,
            Cause.LOGIN_REFUSED,
            f"the login shell on {label} is a restricted shell, which refuses the session's command ({reason})",
        )
    if code in (EXIT_NOT_FOUND, EXIT_NOT_EXECUTABLE) and (ready is not False):
        # ssh's 127 is the remote shell's "not found": the seeds' port_exit, with its cause.
        what = "was not found" if code == EXIT_NOT_FOUND else "cannot be run"
        return error(
            ErrorKind.PORT_EXIT,
            Cause.AGENT_NOT_FOUND,
            f"the agent command {what} on {label}" + (f" ({reason})" if reason else ""),
        )
    if ready is False or (ready is None and not agent_wrote and code == 1 and not reason):
        said = f" ({reason})" if reason else ""
        return error(
            ErrorKind.PORT_EXIT,
            Cause.LOGIN_REFUSED,
            f"the login on {label} ended with {status.describe()} before the session's command started{said}: "
            "the account's login shell runs no command (/bin/false, nologin), or sshd_config forces "
            "another command (ForceCommand)",
        )
    if code == SSH_FAILED and not agent_wrote:
        # Logged in, the agent said nothing, and ssh failed: the link went, not the agent (an
        # agent that exits 255 after output is left to the generic reading).
        said = f" ({reason})" if reason else ""
        return error(ErrorKind.PORT_EXIT, Cause.LINK_LOST, f"the ssh connection to {label} was lost{said}")
    return None


def _after(stderr: str, mark: str) -> str:
    """The word(s) the script printed after ``mark``, on that line of the tail."""
    return stderr.split(mark, 1)[1].split(" | ", 1)[0].strip()


def _ssh_target(label: str, config: str | None = None) -> str:
    """``label`` (``user@host:port``) as the words of an ``ssh`` command line (``-F config``
    first when the session's ssh was given one)."""
    config = config if config and config.lower() != "none" else None
    head, colon, port = label.rpartition(":")
    if colon and port.isdigit() and (head.endswith("]") or ":" not in head):
        return ssh_words(head.replace("[", "").replace("]", ""), int(port), config=config)
    return ssh_words(label, config=config)


def _connection_error(label: str, reason: str, stderr: str, facts: ErrorFacts) -> RemoteAcpError:
    """ssh failed before the server accepted the login: the cause from ssh's own words."""
    # A message that quotes ssh's reason takes the tail as detail only when it says more than that.
    more_said = [line for line in _lines(stderr) if not _CHATTER.match(line) and line.removeprefix("ssh: ") != reason]

    def error(cause: Cause, message: str, **more: Any) -> RemoteAcpError:
        detail = stderr if more_said or not reason or reason not in message else ""
        return RemoteAcpError(ErrorKind.PORT_EXIT, message, detail=detail, cause=cause, facts=replace(facts, **more))

    said = f": {reason}" if reason else ""
    if any(mark in stderr for mark in _KEY_CHANGED):
        line = _KEYGEN_LINE.search(stderr)
        # ssh quotes its words for the eye ("..."); the fix quotes them for a shell.
        where = {"known_hosts": _unquoted(line[1]), "key_name": _unquoted(line[2])} if line else {}
        return error(
            Cause.HOST_KEY_CHANGED,
            f"the host key of {label} has changed: it may be an attack, or the host was reinstalled",
            **where,
        )
    if "Host key verification failed" in stderr:
        return error(
            Cause.HOST_KEY_UNKNOWN,
            f"the host key of {label} is not known, and the host key policy (yes, or ask in the ssh_config) "
            "refuses an unknown key",
        )
    if "Permission denied" in stderr:
        return error(Cause.AUTH_FAILED, f"{label} refused the authentication{said}")
    if "Cannot execute command-line and remote command" in stderr:
        return error(
            Cause.SSH_CONFIG_INVALID,
            f"the ssh_config sets a RemoteCommand for {label}, which conflicts with the session's command "
            "(this ssh does not know RemoteCommand=none)",
        )
    if "Bad configuration option" in stderr or "Bad owner or permissions" in stderr or "line 0:" in stderr:
        return error(Cause.SSH_CONFIG_INVALID, f"ssh refused its configuration for {label}{said}")
    if any(mark in stderr for mark in _UNRESOLVED):
        return error(Cause.NAME_UNRESOLVED, f"ssh could not resolve the name of {label}{said}")
    if "Connection refused" in stderr:
        return error(Cause.CONNECT_REFUSED, f"{label} refused the ssh connection{said}")
    if any(mark in stderr for mark in _TIMED_OUT):
        return error(Cause.CONNECT_TIMEOUT, f"the ssh connection to {label} timed out{said}")
    return error(Cause.CONNECT_FAILED, f"the ssh connection to {label} failed{said}")


def _unquoted(word: str) -> str:
    return word[1:-1] if len(word) > 1 and word[0] == word[-1] and word[0] in "\"'" else word


def ssh_ready_error(
    label: str, bound_ms: int, *, stderr: str, printed: str, config: str | None = None
) -> RemoteAcpError:
    """The error for an ssh to ``label`` whose remote side did not say it was ready within
    ``bound_ms`` (:func:`remote_acp.targets.ssh.argv.ready_bound_ms`). ``printed``: what came on
    stdout instead (masked).

    Before the server accepted the login, the connection setup did not complete (a server that
    stalls the key exchange, a network that drops packets): ``connect_timeout``, retryable. After
    it, the login hangs or does not run the session's command: ``login_reads_stdin``, not
    retryable.
    """
    reason = ssh_reason(stderr)
    said = f" ({reason})" if reason else ""
    facts = ErrorFacts(
        destination=label,
        ssh_reason=bounded_fact(reason) if reason else None,
        ssh_target=_ssh_target(label, config),
        bound_ms=bound_ms,
    )
    if not authenticated(stderr):
        return RemoteAcpError(
            ErrorKind.PORT_EXIT,
            f"the ssh connection setup to {label} did not complete in time: no login within {bound_ms} ms"
            f"{said}; the server accepted the connection but did not finish the key exchange or the "
            "authentication",
            detail=stderr,
            cause=Cause.CONNECT_TIMEOUT,
            facts=facts,
        )
    return RemoteAcpError(
        ErrorKind.RESPONSE_TIMEOUT,
        f"the login on {label} did not start the session's command within {bound_ms} ms{said}: a login "
        "that hangs, a login script (.bashrc, .profile, config.fish...) that reads standard input or "
        "starts another shell, or a ForceCommand in sshd_config that runs something else",
        detail=f"it printed: {printed}" if printed else "it printed nothing",
        cause=Cause.LOGIN_READS_STDIN,
        facts=facts,
    )
