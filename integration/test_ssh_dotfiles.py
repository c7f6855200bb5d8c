"""Dotfiles that print, read stdin, replace the shell, trim PATH or hang, through a real sshd for
throwaway users with real login shells: each session either works or fails fast with the right
kind and a message that names the likely cause, and nothing starts on the host for a session
that was given up."""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING

import anyio
import pytest

from integration.users import SHELLS, User, agent_pythonpath, login_shell, throwaway_user, uid_processes
from remote_acp import ErrorKind, RemoteAcpError, SessionOptions, open_session
from remote_acp.targets.ssh.argv import ready_bound_ms
from remote_acp.targets.ssh.settings import SshSettings
from remote_acp.targets.ssh.target import SshTarget
from tests.support.agent_scripts import RECORDING_AGENT, SYSTEM_PYTHON
from tests.support.agents import fast_options

if TYPE_CHECKING:
    from pathlib import Path

    from integration.sshlab import SshLab

pytestmark = pytest.mark.anyio

SSH_BOUNDS = {"read_timeout_ms": 10_000, "initialize_floor_ms": 20_000, "stop_grace_ms": 1_000}
READY_HINT = "login script (.bashrc, .profile, config.fish...) that reads standard input"


@pytest.fixture(autouse=True)
def private_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMOTE_ACP_CACHE_DIR", str(tmp_path / "cache"))


def agent(record: Path) -> list[str]:
    """The scripted agent, after writing its cwd and environment to ``record``."""
    assert SYSTEM_PYTHON is not None
    return [SYSTEM_PYTHON, "-c", RECORDING_AGENT, str(record)]


def target(lab: SshLab, user: User, **settings: object) -> SshTarget:
    environ = {**os.environ, "PYTHONPATH": str(agent_pythonpath())}
    return SshTarget(
        user.destination("lab1"),
        SshSettings(config_file=str(lab.config), pass_env=("PYTHONPATH",), **settings),  # type: ignore[arg-type]
        environ=environ,
    )


def options(command: list[str] | str) -> SessionOptions:
    return fast_options(command, **SSH_BOUNDS)


async def start_error(user: User, tgt: SshTarget, command: list[str] | str) -> RemoteAcpError:
    with pytest.raises(RemoteAcpError) as info:
        async with open_session(str(user.home), options(command), target=tgt):
            pass
    return info.value


async def processes_gone(user: User, within: float) -> bool:
    deadline = time.monotonic() + within
    while await anyio.to_thread.run_sync(uid_processes, user.uid):
        if time.monotonic() > deadline:
            return False
        await anyio.sleep(0.2)
    return True


PRINTING = [
    ("bash", ".bashrc", 'echo hello from bashrc; echo \'{"jsonrpc": "2.0", "id": 1}\'\n'),
    ("zsh", ".zshenv", "echo hello from zshenv\n"),
    ("csh", ".cshrc", "echo hello from cshrc\n"),
    ("tcsh", ".cshrc", "echo hello from cshrc\n"),
    ("fish", ".config/fish/config.fish", "echo hello from config.fish\n"),
    ("dash", ".profile", "echo hello from profile\n"),
]


@pytest.mark.parametrize(("shell", "dotfile", "text"), PRINTING, ids=[f"{s}-{d}" for s, d, _ in PRINTING])
async def test_a_dotfile_that_prints_does_not_touch_the_protocol(
    ssh_lab: SshLab, homes: Path, shell: str, dotfile: str, text: str
) -> None:
    key = ssh_lab.client_key.with_suffix(".pub")
    with throwaway_user(key, shell=login_shell(shell, homes), base=homes, dotfiles={dotfile: text}) as user:
        record = user.home / "record.json"
        async with open_session(str(user.home), options(agent(record)), target=target(ssh_lab, user)) as s:
            result = await s.run_turn("hi", lambda event: None)
            assert result.ok and result.last_message == "hi"
        assert json.loads(record.read_text())["cwd"] == str(user.home)


async def test_a_bashrc_that_reads_a_line_of_stdin_fails_at_once_and_says_why(ssh_lab: SshLab, homes: Path) -> None:
    key = ssh_lab.client_key.with_suffix(".pub")
    with throwaway_user(key, shell=SHELLS["bash"], base=homes, dotfiles={".bashrc": "read -r line\n"}) as user:
        record = user.home / "record.json"
        started = time.monotonic()
        error = await start_error(user, target(ssh_lab, user), agent(record))
        assert time.monotonic() - started < 15  # not the 60 s initialize bound
        assert not error.retryable
        assert "reads standard input" in error.message, error
        assert not record.exists()


@pytest.mark.parametrize(("shell", "dotfile"), [("bash", ".bashrc"), ("fish", ".config/fish/config.fish")])
async def test_a_dotfile_that_reads_all_of_stdin_ends_in_a_timeout_naming_it(
    ssh_lab: SshLab, homes: Path, shell: str, dotfile: str
) -> None:
    key = ssh_lab.client_key.with_suffix(".pub")
    body = "echo swallowing; cat > /dev/null\n"
    with throwaway_user(key, shell=login_shell(shell, homes), base=homes, dotfiles={dotfile: body}) as user:
        record = user.home / "record.json"
        tgt = target(ssh_lab, user, connect_timeout_s=2)
        error = await start_error(user, tgt, agent(record))
        assert error.kind is ErrorKind.RESPONSE_TIMEOUT and not error.retryable
        assert f"within {ready_bound_ms(tgt.settings)} ms" in error.message
        assert READY_HINT in error.message
        assert "swallowing" in error.detail  # what it printed instead of the marker
        assert await processes_gone(user, 30)
        assert not record.exists()


async def test_a_bashrc_that_execs_zsh_works_or_fails_saying_why(ssh_lab: SshLab, homes: Path) -> None:
    key = ssh_lab.client_key.with_suffix(".pub")
    dotfiles = {".bashrc": "exec zsh\n"}
    with throwaway_user(key, shell=SHELLS["bash"], base=homes, dotfiles=dotfiles) as user:
        record = user.home / "record.json"
        tgt = target(ssh_lab, user, connect_timeout_s=2)
        try:
            async with open_session(str(user.home), options(agent(record)), target=tgt) as s:
                result = await s.run_turn("hi", lambda event: None)
                assert result.ok and result.last_message == "hi"
        except RemoteAcpError as error:
            assert not error.retryable
            assert "login script" in error.message, error
            assert not record.exists()
        else:
            assert json.loads(record.read_text())["cwd"] == str(user.home)


@pytest.mark.parametrize(("shell", "dotfile"), [("bash", ".bashrc"), ("tcsh", ".cshrc")])
async def test_a_login_that_hangs_past_the_bound_never_starts_the_agent(
    ssh_lab: SshLab, homes: Path, shell: str, dotfile: str
) -> None:
    key = ssh_lab.client_key.with_suffix(".pub")
    with throwaway_user(key, shell=login_shell(shell, homes), base=homes, dotfiles={dotfile: "sleep 10\n"}) as user:
        ran = user.home / "agent-ran"
        tgt = target(ssh_lab, user, connect_timeout_s=1)
        assert ready_bound_ms(tgt.settings) < 10_000
        error = await start_error(user, tgt, f"touch {ran}; exec {' '.join(agent(user.home / 'record.json'))}")
        assert error.kind is ErrorKind.RESPONSE_TIMEOUT and not error.retryable
        assert READY_HINT in error.message
        # The login goes on sleeping after the session was given up; once it and everything it
        # started are gone, nothing has run.
        assert await processes_gone(user, 60), "the hung login never ended"
        assert not ran.exists(), "the agent started for a session that had ended"


async def test_a_path_without_the_supervisors_tools_keeps_the_agents_path(ssh_lab: SshLab, homes: Path) -> None:
    key = ssh_lab.client_key.with_suffix(".pub")
    empty = "/nonexistent-ra-bin"
    dotfiles = {".bashrc": f"PATH={empty}; export PATH\n"}
    with throwaway_user(key, shell=SHELLS["bash"], base=homes, dotfiles=dotfiles) as user:
        record = user.home / "record.json"
        async with open_session(str(user.home), options(agent(record)), target=target(ssh_lab, user)) as s:
            result = await s.run_turn("hi", lambda event: None)
            assert result.ok
        assert json.loads(record.read_text())["env"]["PATH"] == empty
