"""A user's ssh_config cannot change what ssh does to a session.

Each test puts one option in the ssh_config the session reads, for the host it connects to, and
runs a real session through a real sshd. Each first shows, with a plain ``ssh`` reading the same
file, that the option breaks a command run the ordinary way; the session must not notice it.
"""

from __future__ import annotations

import socket
import subprocess
from typing import TYPE_CHECKING

import pytest

from remote_acp import Event, Malformed, SessionOptions, open_session
from remote_acp.targets.ssh.settings import SshSettings
from remote_acp.targets.ssh.target import SshTarget
from tests.support.agents import fast_options, scripted
from tests.support.orphans import alive

if TYPE_CHECKING:
    from pathlib import Path

    from integration.sshlab import SshLab

pytestmark = pytest.mark.anyio

HOST = "lab1"
SSH_BOUNDS = {"read_timeout_ms": 5_000, "initialize_floor_ms": 15_000, "stop_grace_ms": 1_000}
PLAIN_SSH_TIMEOUT_S = 30


@pytest.fixture(autouse=True)
def private_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The generated ssh_configs go to the test's own directory, never the user's cache."""
    monkeypatch.setenv("REMOTE_ACP_CACHE_DIR", str(tmp_path / "cache"))


def options() -> SessionOptions:
    return fast_options(scripted(), **SSH_BOUNDS)


def user_config(lab: SshLab, tmp_path: Path, *lines: str) -> Path:
    """The lab's ssh_config with ``lines`` set for HOST (first, so they win over the lab's)."""
    tmp_path.mkdir(exist_ok=True)
    config = tmp_path / "user_ssh_config"
    config.write_text(f"Host {HOST}\n" + "".join(f"  {line}\n" for line in lines) + "\n" + lab.config.read_text())
    return config


def plain_ssh(
    config: Path, command: str, stdin: bytes = b"", timeout: float = PLAIN_SSH_TIMEOUT_S
) -> subprocess.CompletedProcess[bytes]:
    """The ordinary way: ``ssh -F config HOST command``, with stdin."""
    return subprocess.run(
        ["ssh", "-F", str(config), "-T", "-o", "BatchMode=yes", HOST, command],
        input=stdin, capture_output=True, timeout=timeout, check=False,
    )  # fmt: skip


def ssh_g(config: Path, command: str) -> list[str]:
    """What a plain ``ssh -F config HOST command`` would use (``ssh -G``: it connects nowhere)."""
    argv = ["ssh", "-F", str(config), "-G", HOST, command]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=PLAIN_SSH_TIMEOUT_S, check=True)
    return done.stdout.splitlines()


async def run_session(config: Path) -> list[Event]:
    events: list[Event] = []
    target = SshTarget(HOST, SshSettings(config_file=str(config)))
    async with open_session("/tmp", options(), target=target) as session:
        for word in ("one", "two"):
            result = await session.run_turn(f"@chunks=2 {word}", events.append)
            assert result.ok and result.last_message == word
        # The ssh we started still carries the session (it did not hand it to a background copy).
        assert session.pid is not None and alive(session.pid)
    assert not [e for e in events if isinstance(e, Malformed)]
    return events


async def test_remote_command_in_the_users_config(ssh_lab: SshLab, tmp_path: Path) -> None:
    config = user_config(ssh_lab, tmp_path, "RemoteCommand echo from-the-config")
    control = plain_ssh(config, "echo hi")
    assert control.returncode == 255 and b"Cannot execute command-line and remote command" in control.stderr
    await run_session(config)


async def test_local_command_in_the_users_config(ssh_lab: SshLab, tmp_path: Path) -> None:
    ran = tmp_path / "local-command-ran"
    # Its output would land on our stdout, in the protocol stream.
    config = user_config(
        ssh_lab, tmp_path, "PermitLocalCommand yes", f"LocalCommand touch {ran}; echo not-a-protocol-line"
    )
    control = plain_ssh(config, "echo hi")
    assert control.returncode == 0 and control.stdout.startswith(b"not-a-protocol-line\n") and ran.exists()
    ran.unlink()
    await run_session(config)
    assert not ran.exists()


async def test_stdin_null_in_the_users_config(ssh_lab: SshLab, tmp_path: Path) -> None:
    config = user_config(ssh_lab, tmp_path, "StdinNull yes")
    control = plain_ssh(config, "cat", stdin=b"a request\n")
    assert control.returncode == 0 and control.stdout == b""  # the remote side never sees its input
    await run_session(config)


async def test_session_type_none_in_the_users_config(ssh_lab: SshLab, tmp_path: Path) -> None:
    config = user_config(ssh_lab, tmp_path, "SessionType none")
    # No command runs: ssh just holds the connection (until the timeout here).
    with pytest.raises(subprocess.TimeoutExpired):
        plain_ssh(config, "echo hi", timeout=3)
    await run_session(config)


async def test_fork_after_authentication_in_the_users_config(ssh_lab: SshLab, tmp_path: Path) -> None:
    config = user_config(ssh_lab, tmp_path, "ForkAfterAuthentication yes")
    # ssh would go to the background once logged in, with stdin from /dev/null (not run here: a
    # background ssh would outlive the test).
    assert "forkafterauthentication yes" in ssh_g(config, "echo hi")
    await run_session(config)


async def test_all_of_them_at_once(ssh_lab: SshLab, tmp_path: Path) -> None:
    ran = tmp_path / "local-command-ran"
    # A forwarding whose port is taken, with ExitOnForwardFailure: ssh would give up.
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    config = user_config(
        ssh_lab,
        tmp_path,
        "RemoteCommand echo from-the-config",
        "PermitLocalCommand yes",
        f"LocalCommand touch {ran}; echo not-a-protocol-line",
        "StdinNull yes",
        "SessionType none",
        "ForkAfterAuthentication yes",
        "RequestTTY force",
        "LogLevel QUIET",
        "ConnectionAttempts 3",
        "VisualHostKey yes",
        f"LocalForward 127.0.0.1:{port} 127.0.0.1:22",
        "ExitOnForwardFailure yes",
    )
    with taken:
        forward = (f"LocalForward 127.0.0.1:{port} 127.0.0.1:22", "ExitOnForwardFailure yes")
        control = plain_ssh(user_config(ssh_lab, tmp_path / "control", *forward), "echo hi")
        assert control.returncode == 255 and control.stdout == b"", control.stderr
        await run_session(config)
    assert not ran.exists()
