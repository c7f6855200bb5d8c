"""Why a host, a login or an agent on it could not do its work: one closed vocabulary, one table.

Every failure, wherever it is found (an asyncssh probe, a session's ``ssh`` login, the agent's
answers over ACP, a turn's bounds), names one :class:`Cause`. The table :data:`CAUSES` is the only
place that says, per cause, which host verdict it is (``check host``'s vocabulary,
:class:`~hostinv.probes.Verdict`), whether a fresh attempt can succeed, and what a person does
about it. Nothing decides anything by reading a message's words: the cause is data, set where the
failure is recognised.

It lives here, the lowest layer, so that ``hostinv`` (which never imports ``remote_acp``) and
``remote_acp`` speak it alike; ``remote_acp`` re-exports it. The ACP causes (a refused credential,
a stalled turn) are part of the same vocabulary because a host check ends in them too.

Fix texts are templates over a few named facts (``{destination}``, ``{workspace}``, ``{tool}``,
...). :func:`fix_for` fills them, shell-quoting each fact, so a printed command runs as printed;
a fact not known is left as a placeholder in capitals (``HOST``), never as an empty word. Where a
fix is a command, it comes last, after ``": "`` (:func:`fix_command` takes it out).
"""

from __future__ import annotations

import enum
import shlex
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["CAUSES", "Cause", "CauseInfo", "fix_command", "fix_for", "ssh_words"]


class Cause(enum.StrEnum):
    """Why something failed; the values are the stable JSON vocabulary (``cause``)."""

    # -- reaching the host ---------------------------------------------------------------------
    NAME_UNRESOLVED = "name_unresolved"
    CONNECT_REFUSED = "connect_refused"
    CONNECT_TIMEOUT = "connect_timeout"
    CONNECT_FAILED = "connect_failed"
    HOST_KEY_CHANGED = "host_key_changed"
    HOST_KEY_UNKNOWN = "host_key_unknown"
    AUTH_FAILED = "auth_failed"
    SSH_CONFIG_INVALID = "ssh_config_invalid"
    LINK_LOST = "link_lost"
    # -- the login and the host's side of a session --------------------------------------------
    LOGIN_REFUSED = "login_refused"
    LOGIN_READS_STDIN = "login_reads_stdin"
    TOOL_MISSING = "tool_missing"
    SLOTS_UNUSABLE = "slots_unusable"
    AT_CAPACITY = "at_capacity"
    WORKSPACE_INVALID = "workspace_invalid"
    # -- a session that outlives its link (a reattach window) -------------------------------------
    SESSION_EXPIRED = "session_expired"
    NOT_OWNER = "not_owner"
    ATTACHED_ELSEWHERE = "attached_elsewhere"
    OFFSET_LOST = "offset_lost"
    NO_REATTACH_WINDOW = "no_reattach_window"
    # -- the agent ---------------------------------------------------------------------------
    AGENT_NOT_FOUND = "agent_not_found"
    SPAWN_FAILED = "spawn_failed"
    OUT_OF_DESCRIPTORS = "out_of_descriptors"
    AGENT_EXITED = "agent_exited"
    AGENT_KILLED = "agent_killed"
    AGENT_LOST = "agent_lost"
    NO_ANSWER = "no_answer"
    PROTOCOL_INCOMPATIBLE = "protocol_incompatible"
    PROTOCOL_VIOLATION = "protocol_violation"
    CREDENTIAL_REFUSED = "credential_refused"
    AGENT_ERROR = "agent_error"
    PROBE_INCOMPLETE = "probe_incomplete"
    # -- a turn --------------------------------------------------------------------------------
    CANCELLED = "cancelled"
    STALLED = "stalled"
    TURN_DEADLINE = "turn_deadline"
    INPUT_REQUIRED = "input_required"
    REFUSED = "refused"
    TOKEN_LIMIT = "token_limit"
    REQUEST_LIMIT = "request_limit"
    OUTCOME_UNKNOWN = "outcome_unknown"
    AGENT_REPORTED_FAILURE = "agent_reported_failure"
    # -- the caller's side ---------------------------------------------------------------------
    CONFIG_INVALID = "config_invalid"
    MISUSE = "misuse"
    NO_HOST_AVAILABLE = "no_host_available"


@dataclass(frozen=True, slots=True)
class CauseInfo:
    """What one cause means for whoever meets it.

    ``verdict``: the host verdict (:class:`~hostinv.probes.Verdict` value) a check ends in, or
    ``None`` for causes only a turn or a caller meets. ``retryable``: whether a fresh attempt can
    succeed without anyone changing anything. ``fix``: what to do, a template (see
    :func:`fix_for`), or ``""`` when there is nothing to do but what ``retryable`` says.
    """

    verdict: str | None
    retryable: bool
    fix: str


_I = CauseInfo
CAUSES: Final[Mapping[Cause, CauseInfo]] = MappingProxyType(
    {
        Cause.NAME_UNRESOLVED: _I(
            "unreachable", True, "check the host's name or address (or its HostName in ssh_config) and DNS"
        ),
        Cause.CONNECT_REFUSED: _I(
            "unreachable", True, "check that sshd runs on the host and listens on that address and port"
        ),
        Cause.CONNECT_TIMEOUT: _I(
            "unreachable",
            True,
            "check that the host is up and reachable (firewall, VPN), or raise the connect timeout",
        ),
        Cause.CONNECT_FAILED: _I(
            "unreachable",
            True,
            "retry; if it recurs, check the host's sshd log (MaxStartups, a ban) or lower the concurrency",
        ),
        Cause.HOST_KEY_CHANGED: _I(
            "host_key_changed",
            False,
            "find out why the key changed (a reinstalled host, or someone in between); if you trust the "
            "new key: ssh-keygen -f {known_hosts} -R {key_name}",
        ),
        Cause.HOST_KEY_UNKNOWN: _I(
            "host_key_unknown",
            False,
            "check the host's key out of band, then add it to {known_hosts}: "
            "ssh -o StrictHostKeyChecking=accept-new {ssh_target} true",
        ),
        Cause.AUTH_FAILED: _I(
            "auth_failed",
            False,
            "load an encrypted key into ssh-agent, set the host's user and identity_file, or put your "
            "public key in the account's ~/.ssh/authorized_keys: ssh-copy-id {ssh_target}",
        ),
        Cause.SSH_CONFIG_INVALID: _I(
            "unreachable", False, "correct the ssh_config (or the host's ssh_options in the inventory)"
        ),
        Cause.LINK_LOST: _I("unreachable", True, "retry; if it recurs, check the network to the host"),
        Cause.LOGIN_REFUSED: _I(
            "probe_failed",
            False,
            "give the account a login shell that runs the command it is given (no nologin, no restricted "
            "shell, no ForceCommand in sshd_config)",
        ),
        Cause.LOGIN_READS_STDIN: _I(
            "probe_failed",
            False,
            "make the login scripts (.bashrc, .profile, config.fish...) read nothing and start nothing when "
            "standard input is not a terminal",
        ),
        Cause.TOOL_MISSING: _I("agent_not_found", False, "install {tool} on the host"),
        Cause.SLOTS_UNUSABLE: _I(
            "at_capacity", False, "remove {slot_dir} on the host (its owner or root can), then retry"
        ),
        Cause.AT_CAPACITY: _I(
            "at_capacity",
            True,
            "wait for a session there to end, pick another host, or raise the host's capacity in the inventory",
        ),
        Cause.WORKSPACE_INVALID: _I(
            "workspace_invalid", False, "pass a workspace that exists, or create it: mkdir -p -- {workspace}"
        ),
        # A session's, not a host's (no verdict), except the host that will not keep one.
        Cause.SESSION_EXPIRED: _I(
            None,
            False,
            "start a new session (the detached one left nothing running); if links stay down longer than "
            "the reattach window, raise it",
        ),
        Cause.NOT_OWNER: _I(
            None,
            False,
            "attach with the handle (its secret) of the controller that started the session, as the same "
            "user; or start a new session",
        ),
        Cause.ATTACHED_ELSEWHERE: _I(
            None, True, "retry once the other controller has let the session go, or take it over with its handle"
        ),
        Cause.OFFSET_LOST: _I(
            None,
            False,
            "start a new session, and check the workspace for what the interrupted turn did before running it again",
        ),
        Cause.NO_REATTACH_WINDOW: _I(
            "probe_failed",
            False,
            "let the account keep its processes after its last logout (as root on the host: loginctl "
            "enable-linger USER, or KillUserProcesses=no and no StopIdleSessionSec in logind.conf), or run "
            "there without a reattach window",
        ),
        Cause.AGENT_NOT_FOUND: _I(
            "agent_not_found",
            False,
            "install the agent where it runs, or give its full path (a session's PATH is a non-interactive "
            "login's, often shorter than yours)",
        ),
        Cause.SPAWN_FAILED: _I("agent_failed", True, "retry; if it recurs, run the agent by hand to see why"),
        Cause.OUT_OF_DESCRIPTORS: _I("agent_failed", False, "close sessions, or raise the open-file limit (ulimit -n)"),
        Cause.AGENT_EXITED: _I(
            "agent_failed", False, "run the agent command by hand where it runs to see why it stops"
        ),
        Cause.AGENT_KILLED: _I(
            "agent_failed", True, "retry; if it recurs, look for what kills it (the OOM killer, a watchdog)"
        ),
        Cause.AGENT_LOST: _I("agent_failed", True, "retry; the agent's standard-error tail may say why it ended"),
        Cause.NO_ANSWER: _I(
            "handshake_timeout",
            True,
            "raise the read bound (read_timeout_ms, or --handshake-timeout-ms for a check) if the agent "
            "starts slowly, or run it by hand to see where it waits",
        ),
        Cause.PROTOCOL_INCOMPATIBLE: _I(
            "incompatible_protocol",
            False,
            "install a version of the agent that speaks ACP protocol version 1",
        ),
        Cause.PROTOCOL_VIOLATION: _I(
            "incompatible_protocol",
            False,
            "check that the command starts the agent in ACP mode (often an --acp or acp argument)",
        ),
        Cause.CREDENTIAL_REFUSED: _I(
            "credential_unverified",
            False,
            "log the agent in where it runs, or pass its key in the environment (ssh_pass_env over ssh)",
        ),
        Cause.AGENT_ERROR: _I(
            "agent_failed", True, "retry; if it recurs, the error's data and the agent's stderr say more"
        ),
        Cause.PROBE_INCOMPLETE: _I("probe_failed", True, "retry; if it recurs, raise the probe's command timeout"),
        Cause.CANCELLED: _I(None, False, ""),
        Cause.STALLED: _I(None, True, "retry; raise stall_timeout_ms if the agent works silently for longer than that"),
        Cause.TURN_DEADLINE: _I(None, True, "retry, or raise turn_timeout_ms"),
        Cause.INPUT_REQUIRED: _I(None, False, "answer the agent's question in an attended session"),
        Cause.REFUSED: _I(None, False, "change the prompt"),
        Cause.TOKEN_LIMIT: _I(None, False, "shorten the task or raise the agent's token limit"),
        Cause.REQUEST_LIMIT: _I(None, True, "continue the session with another turn"),
        Cause.OUTCOME_UNKNOWN: _I(None, False, "check the workspace for what the turn did before running it again"),
        Cause.AGENT_REPORTED_FAILURE: _I(None, True, "retry; the agent's messages say why it failed"),
        Cause.CONFIG_INVALID: _I("probe_failed", False, "correct the configuration the message names"),
        Cause.MISUSE: _I(None, False, ""),
        Cause.NO_HOST_AVAILABLE: _I(
            None, True, "wait for a host to free a slot or come back, or fix what each host's cause names"
        ),
    }
)

# The facts a fix may name, and what stands in their place when unknown.
_PLACEHOLDER: Final = {
    "destination": "HOST",
    "ssh_target": "HOST",
    "known_hosts": "~/.ssh/known_hosts",
    "key_name": "HOST",
    "workspace": "WORKSPACE",
    "tool": "the missing tool",
    "slot_dir": "the slots directory",
}
# Named in words, not run; or (ssh_target) already shell words, from :func:`ssh_words`.
_UNQUOTED: Final = frozenset({"tool", "slot_dir", "ssh_target"})


def ssh_words(destination: str, port: int | None = None, *, config: str | None = None) -> str:
    """``destination`` (``user@host``, no port) and ``port`` as the words an ``ssh`` or
    ``ssh-copy-id`` command line takes, quoted for a POSIX shell: ``-p 2222 'user@host'``; with
    ``config`` (an ssh_config the failing ssh was given), ``-F config`` first, so the printed
    command meets the host as the check did."""
    words = ["-F", config] if config else []
    words += ["-p", str(port)] if port is not None else []
    return shlex.join([*words, destination])


def fix_for(cause: Cause, **facts: str | None) -> str:
    """The fix for ``cause`` with ``facts`` filled in (each quoted for a POSIX shell when it is
    a word of a command), or ``""`` when the cause has none."""
    template = CAUSES[cause].fix
    if "{" not in template:
        return template
    values = {}
    for name, placeholder in _PLACEHOLDER.items():
        value = facts.get(name)
        if not value:
            values[name] = placeholder
        elif name in _UNQUOTED:
            values[name] = value
        else:
            values[name] = shlex.quote(value)
    return template.format_map(values)


_missing = [cause for cause in Cause if cause not in CAUSES]
assert not _missing, f"causes without a table entry: {_missing}"


# The fixes that end in a command a person runs as printed.
COMMAND_FIXES: Final = frozenset(
    {Cause.HOST_KEY_CHANGED, Cause.HOST_KEY_UNKNOWN, Cause.AUTH_FAILED, Cause.WORKSPACE_INVALID}
)


def fix_command(fix: str) -> str | None:
    """The command a fix ends with (after its last ``": "``), or ``None`` when it has none."""
    head, sep, command = fix.rpartition(": ")
    runs = command.split(" ", 1)[0] in {"ssh", "ssh-keygen", "ssh-copy-id", "mkdir"}
    return command if sep and head and runs else None
