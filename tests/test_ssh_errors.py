"""The reading of an ssh that ended during start-up, as data: ssh's own words (OpenSSH 9.2 at
LogLevel VERBOSE, as the session runs it) in, the kind, the retry class and the message out.

``integration/test_ssh_errors.py`` provokes each case against a real sshd.
"""

from __future__ import annotations

import pytest

from remote_acp.errors import Cause, ErrorKind, RemoteAcpError
from remote_acp.targets.exit_status import ExitStatus
from remote_acp.targets.ssh.errors import authenticated, ssh_exit_error, ssh_ready_error, ssh_reason
from remote_acp.targets.ssh.loader import INCOMPLETE_MARK
from remote_acp.targets.ssh.script import TOOL_MARK
from tests.support.ssh_build import SIGNAL_MARK, WORKSPACE_MARK

# Also read from here by tests/test_fleet_verdicts.py, hence the explicit re-export.
from tests.support.ssh_stderr import CHANGED_KEY as CHANGED_KEY
from tests.support.ssh_stderr import LOGIN as LOGIN
from tests.support.ssh_stderr import TRANSFER
from tests.support.ssh_stderr import UNKNOWN_KEY as UNKNOWN_KEY


def read(code: int, stderr: str, *, agent_wrote: bool = False, ready: bool | None = None) -> RemoteAcpError | None:
    return ssh_exit_error("u@build:2222", ExitStatus(code), agent_wrote=agent_wrote, stderr=stderr, ready=ready)


def test_the_login_line_tells_a_failed_connection_from_a_failed_login() -> None:
    assert authenticated(f"{LOGIN} | {TRANSFER}")
    assert authenticated(f"[earlier output omitted] agent noise | {LOGIN} | more")
    assert not authenticated("ssh: connect to host build port 22: Connection refused")
    assert not authenticated(f"the agent printed: {LOGIN}")  # only at the start of a line


def test_the_reason_is_the_last_line_that_explains_something() -> None:
    assert ssh_reason(f"{LOGIN} | rbash: line 1: exec: restricted | {TRANSFER}") == "rbash: line 1: exec: restricted"
    assert ssh_reason("ssh: Could not resolve hostname nope: Name or service not known") == (
        "Could not resolve hostname nope: Name or service not known"
    )
    assert ssh_reason(f"{LOGIN} | {TRANSFER}") == ""
    assert ssh_reason("no standard-error output") == "no standard-error output"


@pytest.mark.parametrize(
    ("stderr", "cause"),
    [
        ("ssh: connect to host build port 2222: Connection refused", Cause.CONNECT_REFUSED),
        ("ssh: connect to host build port 2222: Connection timed out", Cause.CONNECT_TIMEOUT),
        ("Connection to 10.0.0.5 port 2222 timed out", Cause.CONNECT_TIMEOUT),
        ("Timeout, server build not responding.", Cause.CONNECT_TIMEOUT),
        ("ssh: Could not resolve hostname build: Temporary failure in name resolution", Cause.NAME_UNRESOLVED),
        ("kex_exchange_identification: read: Connection reset by peer", Cause.CONNECT_FAILED),
        ("no standard-error output", Cause.CONNECT_FAILED),
    ],
)
def test_a_connection_that_failed_is_retryable_and_quotes_ssh(stderr: str, cause: Cause) -> None:
    error = read(255, stderr)
    assert error is not None
    assert (error.kind, error.cause, error.retryable) == (ErrorKind.PORT_EXIT, cause, True)
    assert error.detail == ""  # the message quotes ssh's one line; said once, not twice
    assert str(error) == error.message and error.message.endswith(f": {stderr.removeprefix('ssh: ')}")
    assert "u@build:2222" in error.message
    assert (error.facts.destination, error.facts.exit_status) == ("u@build:2222", 255)
    assert error.facts.ssh_reason == stderr.removeprefix("ssh: ")


def test_a_changed_host_key_is_permanent_and_names_the_fix() -> None:
    error = read(255, CHANGED_KEY)
    assert error is not None and error.kind is ErrorKind.PORT_EXIT and not error.retryable
    assert error.cause is Cause.HOST_KEY_CHANGED
    assert error.message.startswith("the host key of u@build:2222 has changed")
    assert error.fix.endswith("ssh-keygen -f /home/u/.ssh/known_hosts -R '[build]:2222'")
    assert error.detail == CHANGED_KEY


def test_an_unknown_host_key_under_a_strict_policy_is_permanent() -> None:
    error = read(255, UNKNOWN_KEY)
    assert error is not None and error.kind is ErrorKind.PORT_EXIT and not error.retryable
    assert error.cause is Cause.HOST_KEY_UNKNOWN
    assert error.message.startswith("the host key of u@build:2222 is not known")
    assert error.fix.endswith("ssh -o StrictHostKeyChecking=accept-new -p 2222 u@build true")


def test_refused_authentication_is_permanent() -> None:
    error = read(255, "u@build: Permission denied (publickey).")
    assert error is not None and error.kind is ErrorKind.PORT_EXIT and not error.retryable
    assert error.cause is Cause.AUTH_FAILED
    assert error.message == "u@build:2222 refused the authentication: u@build: Permission denied (publickey)."
    assert error.fix.endswith("authorized_keys: ssh-copy-id -p 2222 u@build")


def test_a_remote_command_conflict_is_permanent() -> None:
    error = read(255, "Cannot execute command-line and remote command.")
    assert error is not None and not error.retryable
    assert error.message.startswith("the ssh_config sets a RemoteCommand for u@build:2222")


@pytest.mark.parametrize(
    "stderr",
    [
        "command-line: line 0: Bad configuration option: sessiontype",
        "/home/u/.ssh/config: line 3: Bad configuration option: sessiontype",
        "Bad owner or permissions on /home/u/.ssh/config",
    ],
)
def test_a_configuration_ssh_refuses_is_permanent(stderr: str) -> None:
    error = read(255, stderr)
    assert error is not None and not error.retryable
    assert error.cause is Cause.SSH_CONFIG_INVALID
    assert error.message == f"ssh refused its configuration for u@build:2222: {stderr}"


@pytest.mark.parametrize(
    ("code", "line", "what"),
    [
        (127, "sh: 1: my-agent: not found", "was not found"),
        (127, "bash: line 1: my-agent: command not found", "was not found"),
        (126, "sh: 1: /opt/my-agent: Permission denied", "cannot be run"),
    ],
)
def test_an_agent_missing_on_the_host_is_port_exit_with_the_cause_agent_not_found(
    code: int, line: str, what: str
) -> None:
    # The seeds' rule: an ssh exit of 127 reaches the session as the loss of its connection.
    for ready in (None, True):
        error = read(code, f"{LOGIN} | {line} | {TRANSFER}", ready=ready)
        assert error is not None and error.kind is ErrorKind.PORT_EXIT and not error.retryable
        assert error.cause is Cause.AGENT_NOT_FOUND
        assert error.message == f"the agent command {what} on u@build:2222 ({line})"
        assert (error.facts.exit_status, error.facts.ssh_reason) == (code, line)


def test_a_restricted_shell_is_permanent() -> None:
    error = read(1, f"{LOGIN} | rbash: line 1: exec: restricted | {TRANSFER}")
    assert error is not None and error.kind is ErrorKind.PORT_EXIT and not error.retryable
    assert error.message.startswith("the login shell on u@build:2222 is a restricted shell")
    assert "(rbash: line 1: exec: restricted)" in error.message


def test_an_agent_that_says_restricted_after_the_ready_marker_is_not_taken_for_a_restricted_shell() -> None:
    # The session's command ran (the marker came): a line of the agent's is not the login's.
    for line in ("Error: API access restricted for this key", "agent: Error: API access restricted"):
        error = read(1, f"{LOGIN} | {line} | {TRANSFER}", ready=True)
        assert error is None or error.cause is not Cause.LOGIN_REFUSED, error


def test_a_login_that_ran_no_command_is_permanent() -> None:
    # /bin/false: status 1, nothing said, nothing written.
    error = read(1, f"{LOGIN} | {TRANSFER}")
    assert error is not None and error.kind is ErrorKind.PORT_EXIT and not error.retryable
    assert error.cause is Cause.LOGIN_REFUSED
    assert error.message.startswith("the login on u@build:2222 ended with exit status 1 before the session's command")
    assert "nologin" in error.message and "ForceCommand" in error.message
    # nologin says why on stdout, and a ForceCommand prints what it prints: with a ready marker,
    # a login that ended before it is read the same way, whatever it wrote or its status.
    for code, wrote in ((1, True), (0, True), (255, True), (3, False)):
        error = read(code, f"{LOGIN} | {TRANSFER}", agent_wrote=wrote, ready=False)
        assert error is not None and not error.retryable and "before the session's command started" in error.message


@pytest.mark.parametrize(
    ("code", "stderr", "wrote", "ready"),
    [
        (1, f"{LOGIN} | Traceback: agent failed | {TRANSFER}", False, None),  # the agent said why
        (1, f"{LOGIN} | {TRANSFER}", True, None),  # the agent wrote something first
        (1, f"{LOGIN} | {TRANSFER}", False, True),  # the remote side was ready: the agent's own exit
        (3, f"{LOGIN} | {TRANSFER}", False, None),
        (255, f"{LOGIN} | {TRANSFER}", True, None),  # a remote exit 255 after output
        (255, "whatever", True, None),
        (127, "sh: 1: my-agent: not found", False, None),  # no login line: not ours to read
        (97, "agent said 97", False, None),
    ],
)
def test_other_exits_are_left_to_the_generic_reading(code: int, stderr: str, wrote: bool, ready: bool | None) -> None:
    assert read(code, stderr, agent_wrote=wrote, ready=ready) is None


def test_the_remote_scripts_marks_are_read_first() -> None:
    workspace = read(97, f"{LOGIN} | {WORKSPACE_MARK} /srv/ws", ready=False)
    assert workspace is not None and workspace.kind is ErrorKind.INVALID_WORKSPACE_CWD
    killed = read(137, f"{LOGIN} | {SIGNAL_MARK} 9", agent_wrote=True)
    assert killed is not None and killed.message == "the agent runtime on u@build:2222 was killed by a signal"


def test_no_ready_marker_before_the_login_is_a_connection_setup_that_did_not_complete() -> None:
    error = ssh_ready_error("build", 8000, stderr="no standard-error output", printed="")
    assert error.kind is ErrorKind.PORT_EXIT and error.retryable
    assert error.message.startswith(
        "the ssh connection setup to build did not complete in time: no login within 8000 ms"
    )


def test_no_ready_marker_after_the_login_is_a_login_that_hangs() -> None:
    error = ssh_ready_error("build", 8000, stderr=f"{LOGIN}", printed="Welcome")
    assert error.kind is ErrorKind.RESPONSE_TIMEOUT and not error.retryable
    assert error.message.startswith("the login on build did not start the session's command within 8000 ms")
    assert "ForceCommand" in error.message and error.detail == "it printed: Welcome"


def test_a_tool_missing_on_the_host_is_agent_not_found_and_named() -> None:
    stderr = f"{LOGIN} | {TOOL_MARK} awk | {TRANSFER}"
    error = read(96, stderr, agent_wrote=True, ready=True)
    assert error is not None and error.kind is ErrorKind.AGENT_NOT_FOUND and not error.retryable
    assert error.message.startswith("u@build:2222 lacks awk, which the session's supervisor needs")
    assert read(96, f"{LOGIN} | the agent's own 96") is None


def test_a_login_script_that_ate_the_session_script_is_permanent() -> None:
    error = read(98, f"{LOGIN} | {INCOMPLETE_MARK} | {TRANSFER}")
    assert error is not None and error.kind is ErrorKind.PORT_EXIT and not error.retryable
    assert error.message.startswith("the session script sent to u@build:2222 on standard input did not arrive whole")
    assert read(98, f"{LOGIN} | the agent's own 98") is None
