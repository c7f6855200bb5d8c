"""SshTarget.prepare's refusals and SshTarget.exit_error's readings of an ended ssh."""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

import pytest

from remote_acp.errors import Cause, ErrorKind
from remote_acp.targets.process.agent import ExitStatus
from remote_acp.targets.ssh.settings import SshSettings
from remote_acp.targets.ssh.target import SshTarget
from tests.support.ssh_build import (
    SIGNAL_MARK,
    WORKSPACE_MARK,
    environ_with,
    fake_ssh,
    prepare,
    raises_kind,
)

if TYPE_CHECKING:
    from pathlib import Path


def test_ssh_target_repr_hides_the_environment() -> None:
    target = SshTarget("build", environ={"API_KEY": "sk-live-0123456789abcdef"})
    assert "sk-live" not in repr(target)
    assert "environ" not in repr(target)
    assert repr(target).startswith("SshTarget(host='build', settings=SshSettings(")


ENV_MESSAGE = "remote-acp: the environment sent on stdin did not arrive whole"


def test_prepare_refuses_bad_inputs(tmp_path: Path) -> None:
    fake_ssh(tmp_path / "bin")
    target = SshTarget("build", environ=environ_with(tmp_path / "bin"))
    with raises_kind(ErrorKind.INVALID_WORKSPACE_CWD):
        prepare(target, ["agent"], "relative/ws")
    with raises_kind(ErrorKind.INVALID_WORKSPACE_CWD):
        prepare(target, ["agent"], "  ")
    with raises_kind(ErrorKind.AGENT_NOT_FOUND):
        prepare(target, "   ", "/srv/ws")
    with raises_kind(ErrorKind.AGENT_NOT_FOUND):
        prepare(target, [], "/srv/ws")
    with raises_kind(ErrorKind.AGENT_NOT_FOUND):
        prepare(SshTarget("-oProxyCommand=x", environ=environ_with(tmp_path / "bin")), ["agent"], "/srv/ws")
    (tmp_path / "empty").mkdir()
    with raises_kind(ErrorKind.AGENT_NOT_FOUND) as info:
        prepare(SshTarget("build", environ=environ_with(tmp_path / "empty")), ["agent"], "/srv/ws")
    assert info.value.message == "ssh binary not found on this host's PATH"


# -- SshTarget.exit_error -----------------------------------------------------------------------


def test_exit_255_before_any_output_is_an_ssh_connection_failure() -> None:
    stderr = "ssh: connect to host build port 22: Connection refused"
    error = SshTarget("build").exit_error(ExitStatus(255), agent_wrote=False, stderr=stderr)
    assert error is not None
    assert (error.kind, error.cause, error.retryable) == (ErrorKind.PORT_EXIT, Cause.CONNECT_REFUSED, True)
    assert error.message == "build refused the ssh connection: connect to host build port 22: Connection refused"
    assert error.detail == ""  # ssh's one line is in the message already


def test_exit_255_after_output_is_not_a_connection_failure() -> None:
    assert SshTarget("build").exit_error(ExitStatus(255), agent_wrote=True, stderr="whatever") is None


def test_exit_97_with_the_mark_is_an_invalid_workspace() -> None:
    for why, said in (
        ("missing", "does not exist"),
        ("not_dir", "is not a directory"),
        ("denied", "cannot be entered by the login user (no search permission)"),
    ):
        stderr = f"{WORKSPACE_MARK} {why} /srv/missing ws\n"
        for agent_wrote in (False, True):
            error = SshTarget("user@build:2222").exit_error(ExitStatus(97), agent_wrote=agent_wrote, stderr=stderr)
            assert error is not None
            assert error.kind is ErrorKind.INVALID_WORKSPACE_CWD
            assert error.message == f"the workspace /srv/missing ws {said} on user@build:2222"
            assert error.facts.workspace == "/srv/missing ws"
            assert error.fix == "pass a workspace that exists, or create it: mkdir -p -- '/srv/missing ws'"


def test_exit_97_without_the_mark_is_left_to_the_generic_reading() -> None:
    assert SshTarget("build").exit_error(ExitStatus(97), agent_wrote=False, stderr="agent said 97") is None


@pytest.mark.parametrize("code", [137, 143, 130])
def test_signal_mark_is_reported_as_a_killed_agent(code: int) -> None:
    stderr = f"{SIGNAL_MARK} {code - 128}\n"
    error = SshTarget("[::1]:2201").exit_error(ExitStatus(code), agent_wrote=True, stderr=stderr)
    assert error is not None
    assert error.kind is ErrorKind.PORT_EXIT
    assert error.message == "the agent runtime on [::1]:2201 was killed by a signal"
    assert "killed by a signal" in str(error)
    assert error.detail == stderr


@pytest.mark.parametrize(
    ("status", "agent_wrote", "stderr"),
    [
        (ExitStatus(0), False, ""),
        (ExitStatus(1), True, "error"),
        (ExitStatus(7), False, ""),
        (ExitStatus(98), False, ENV_MESSAGE),
        (ExitStatus(127), False, "sh: 1: agent: not found"),
        (ExitStatus(137), False, "no mark here"),
        (ExitStatus(254), False, ""),
        (ExitStatus(None, signal.SIGKILL), False, ""),
        (ExitStatus(None, signal.SIGTERM), True, f"{SIGNAL_MARK} 15"),
    ],
)
def test_other_exits_are_left_to_the_generic_reading(status: ExitStatus, agent_wrote: bool, stderr: str) -> None:
    assert SshTarget("build").exit_error(status, agent_wrote=agent_wrote, stderr=stderr) is None


# -- NUL bytes: misconfigured, never retryable, refused before anything starts ------------------


def test_prepare_refuses_nul_bytes_before_anything_runs(tmp_path: Path) -> None:
    fake_ssh(tmp_path / "bin")
    environ = environ_with(tmp_path / "bin", API_KEY="sk-live-0123\x00456789", PLAIN="ok")
    target = SshTarget("build", environ=environ_with(tmp_path / "bin"))
    cases: list[tuple[SshTarget, str | list[str], str, ErrorKind, str]] = [
        (
            target,
            ["agent"],
            "/srv/ws\0/x",
            ErrorKind.INVALID_WORKSPACE_CWD,
            "the workspace path contains a NUL character",
        ),
        (target, "agent --x=\0", "/srv/ws", ErrorKind.AGENT_NOT_FOUND, "the agent command contains a NUL character"),
        (target, ["agent", "a\0b"], "/srv/ws", ErrorKind.AGENT_NOT_FOUND, "the agent command contains a NUL character"),
        (
            SshTarget("build", SshSettings(pass_env=("API_KEY",)), environ=environ),
            ["agent"],
            "/srv/ws",
            ErrorKind.AGENT_NOT_FOUND,
            "the local ssh's environment gives API_KEY a value with a NUL character",
        ),
    ]
    for tgt, command, workspace, kind, message in cases:
        with raises_kind(kind) as info:
            prepare(tgt, command, workspace)
        assert info.value.message.startswith(message) and not info.value.retryable
        assert "sk-live" not in str(info.value)
    assert not (tmp_path / "bin" / "ssh-argv.log").exists()  # refused before even `ssh -G`
