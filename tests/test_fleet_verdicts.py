"""How a session start that failed reads as a host's verdict, as data: errors built by the real
readers (ssh's recorded words through ``ssh_exit_error``, the handshake's own messages) in, the
verdict, message and fix out. ``integration/test_check_host.py`` provokes them against real sshd."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from hostinv import Host
from hostinv.probes import Verdict
from remote_acp.errors import Cause, ErrorKind, RemoteAcpError
from remote_acp.fleet import handshake_judgement, host_config_text, host_target
from remote_acp.targets.exit_status import ExitStatus
from remote_acp.targets.ssh.errors import ssh_exit_error, ssh_ready_error
from remote_acp.targets.ssh.settings import SshSettings
from tests.support.ssh_stderr import CHANGED_KEY, LOGIN, UNKNOWN_KEY


def ssh_error(code: int, stderr: str, *, ready: bool | None = None) -> RemoteAcpError:
    error = ssh_exit_error("u@build:2222", ExitStatus(code), agent_wrote=False, stderr=stderr, ready=ready)
    assert error is not None
    return error


@pytest.mark.parametrize(
    ("stderr", "verdict"),
    [
        ("ssh: connect to host build port 2222: Connection refused", Verdict.UNREACHABLE),
        ("ssh: Could not resolve hostname build: Name or service not known", Verdict.UNREACHABLE),
        ("Connection to 10.0.0.5 port 2222 timed out", Verdict.UNREACHABLE),
        ("u@build: Permission denied (publickey).", Verdict.AUTH_FAILED),
        (UNKNOWN_KEY, Verdict.HOST_KEY_UNKNOWN),
        (CHANGED_KEY, Verdict.HOST_KEY_CHANGED),
        ("/tmp/x/config line 3: Bad configuration option: frobnicate", Verdict.UNREACHABLE),
    ],
)
def test_an_ssh_that_never_logged_in_is_a_connection_verdict(stderr: str, verdict: Verdict) -> None:
    judged = handshake_judgement(ssh_error(255, stderr))
    assert judged.verdict is verdict
    assert judged.fix


def test_a_changed_key_names_the_exact_ssh_keygen_line() -> None:
    judged = handshake_judgement(ssh_error(255, CHANGED_KEY))
    assert (judged.fix or "").endswith(": ssh-keygen -f /home/u/.ssh/known_hosts -R '[build]:2222'")
    assert "has changed" in judged.message


def test_the_ssh_keygen_line_is_quoted_for_a_shell_whatever_the_path() -> None:
    # ssh quotes for the eye; a path with a space, a quote or a $ must still run as printed.
    odd = "/home/u/my keys/it's $HOME"
    judged = handshake_judgement(ssh_error(255, CHANGED_KEY.replace("/home/u/.ssh/known_hosts", odd)))
    command = (judged.fix or "").rsplit(": ", 1)[1]
    assert command == f"ssh-keygen -f {shlex.quote(odd)} -R '[build]:2222'"
    assert shlex.split(command) == ["ssh-keygen", "-f", odd, "-R", "[build]:2222"]


def test_a_key_exchange_that_stalls_is_unreachable_and_a_hanging_login_is_probe_failed() -> None:
    stalled = ssh_ready_error("build", 15_000, stderr="Connection established.", printed="")
    assert (stalled.cause, handshake_judgement(stalled).verdict) == (Cause.CONNECT_TIMEOUT, Verdict.UNREACHABLE)
    # Logged in, but the session's command never started: the login, not the agent, is at fault.
    hanging = ssh_ready_error("build", 15_000, stderr=LOGIN, printed="welcome")
    assert (hanging.cause, handshake_judgement(hanging).verdict) == (Cause.LOGIN_READS_STDIN, Verdict.PROBE_FAILED)


def test_a_login_that_runs_something_else_is_probe_failed() -> None:
    error = ssh_error(1, f"{LOGIN} | This account is currently not available.", ready=False)
    judged = handshake_judgement(error)
    assert judged.verdict is Verdict.PROBE_FAILED
    assert "not available" in judged.message


def test_an_agent_that_exits_early_is_agent_failed_with_its_status_and_stderr() -> None:
    error = RemoteAcpError(
        ErrorKind.PORT_EXIT,
        "the agent runtime exited before responding: exit status 3",
        detail=f"{LOGIN} | boom: no config",
        cause=Cause.AGENT_EXITED,
    )
    judged = handshake_judgement(error)
    assert judged.verdict is Verdict.AGENT_FAILED
    assert "exit status 3" in judged.message and "boom: no config" in judged.message


def test_a_noisy_agent_whose_login_line_left_the_tail_is_still_agent_failed() -> None:
    # The bounded stderr tail lost ssh's "Authenticated to" line: the message still tells.
    error = RemoteAcpError(
        ErrorKind.PORT_EXIT, "the agent runtime exited before responding: exit status 1", detail="x | y"
    )
    assert handshake_judgement(error).verdict is Verdict.AGENT_FAILED


@pytest.mark.parametrize(
    ("error", "verdict"),
    [
        (
            RemoteAcpError(ErrorKind.CREDENTIAL_UNVERIFIED, "the agent runtime refused its credential: 'no key'"),
            Verdict.CREDENTIAL_UNVERIFIED,
        ),
        (
            RemoteAcpError(ErrorKind.RESPONSE_TIMEOUT, "timed out waiting for the agent to answer initialize (500 ms)"),
            Verdict.HANDSHAKE_TIMEOUT,
        ),
        (
            RemoteAcpError(
                ErrorKind.RESPONSE_ERROR, "agent reported protocol version 2, want 1", cause=Cause.PROTOCOL_INCOMPATIBLE
            ),
            Verdict.INCOMPATIBLE_PROTOCOL,
        ),
        (
            RemoteAcpError(
                ErrorKind.RESPONSE_ERROR, "initialize response did not decode", cause=Cause.PROTOCOL_VIOLATION
            ),
            Verdict.INCOMPATIBLE_PROTOCOL,
        ),
        (RemoteAcpError(ErrorKind.RESPONSE_ERROR, "session/new error -32603: internal"), Verdict.AGENT_FAILED),
        (
            RemoteAcpError(ErrorKind.INVALID_WORKSPACE_CWD, "the workspace /srv/ws does not exist on build"),
            Verdict.WORKSPACE_INVALID,
        ),
        (
            RemoteAcpError(ErrorKind.AGENT_NOT_FOUND, "the agent command was not found on build"),
            Verdict.AGENT_NOT_FOUND,
        ),
    ],
)
def test_the_handshake_kinds_map_onto_the_taxonomy(error: RemoteAcpError, verdict: Verdict) -> None:
    judged = handshake_judgement(error)
    assert judged.verdict is verdict
    assert error.message in judged.message
    assert judged.fix


READER_CASES = [
    (255, "ssh: connect to host build port 2222: Connection refused", None),
    (255, "u@build: Permission denied (publickey).", None),
    (255, UNKNOWN_KEY, None),
    (255, CHANGED_KEY, None),
    (255, "/tmp/x/config line 3: Bad configuration option: frobnicate", None),
    (127, f"{LOGIN} | sh: 1: my-agent: not found", None),
    (1, f"{LOGIN} | This account is currently not available.", False),
    (1, f"{LOGIN} | rbash: line 1: exec: restricted", None),
]


@pytest.mark.parametrize(("code", "stderr", "ready"), READER_CASES)
def test_rewording_a_message_moves_no_verdict_and_no_fix(code: int, stderr: str, ready: bool | None) -> None:
    # The verdict and the fix are the cause's: a message written otherwise, or with none of
    # ssh's words left in it, reads the same.
    error = ssh_error(code, stderr, ready=ready)
    reworded = RemoteAcpError(error.kind, "something else went wrong", cause=error.cause, facts=error.facts)
    before, after = handshake_judgement(error), handshake_judgement(reworded)
    assert (after.verdict, after.fix, after.cause) == (before.verdict, before.fix, before.cause)
    assert before.fix and before.verdict is not Verdict.READY


def test_a_host_without_own_ssh_settings_needs_no_generated_config() -> None:
    assert host_config_text(Host(name="b", address="10.0.0.5", user="u", port=2222), None, home="/h") is None


def test_the_inventory_settings_come_first_then_what_ssh_would_read() -> None:
    host = Host(
        name="b",
        address="10.0.0.5",
        identity_file="/keys/id ed25519",
        ssh_options={"ProxyJump": "bastion", "UserKnownHostsFile": "/k/known"},
    )
    text = host_config_text(host, None, home="/h")
    assert text is not None
    lines = text.splitlines()
    assert lines[1:] == [
        'Host "10.0.0.5"',
        '  IdentityFile "/keys/id ed25519"',
        "  ProxyJump bastion",
        "  UserKnownHostsFile /k/known",
        "Match all",
        'Include "/h/.ssh/config"',
        'Include "/etc/ssh/ssh_config"',
    ]
    assert host_config_text(host, "none", home="/h").splitlines()[-1] == "Match all"  # type: ignore[union-attr]


@pytest.mark.parametrize("options", [{"ProxyCommand": "nc %h\nHost *\n  LocalCommand x"}, {"Proxy-Jump": "x"}])
def test_an_option_that_could_write_config_lines_is_refused(options: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="ssh option"):
        host_config_text(Host(name="b", ssh_options=options), None, home="/h")


def test_the_target_is_the_hosts_destination_with_the_generated_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMOTE_ACP_CACHE_DIR", str(tmp_path))
    user_config = tmp_path / "user_config"
    user_config.write_text("Host *\n  ServerAliveInterval 5\n")
    plain = host_target(Host(name="b", address="10.0.0.5", user="u", port=2222), SshSettings())
    assert plain.host == "u@10.0.0.5:2222" and plain.settings.config_file is None
    keyed = host_target(Host(name="b", identity_file="/keys/k"), SshSettings(config_file=str(user_config)))
    assert keyed.host == "b"
    assert keyed.settings.config_file is not None
    written = Path(keyed.settings.config_file).read_text()
    assert '  IdentityFile "/keys/k"' in written and f'Include "{user_config}"' in written
    assert Path(keyed.settings.config_file).parent == tmp_path / "ssh"
