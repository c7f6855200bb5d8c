"""The login shell must not matter: real sessions through a real sshd for users whose login
shells are sh, dash, bash, zsh, ksh, BusyBox ash, fish, csh and tcsh, with hostile workspaces,
list-form commands whose words hold quotes and backslashes, and carried values. No input may run
a command on the host, and the agent runs in exactly the directory asked for."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

import pytest

from integration.users import SHELLS, User, agent_pythonpath, login_shell, throwaway_user
from remote_acp import SessionOptions, open_session
from remote_acp.targets.ssh.settings import SshSettings
from remote_acp.targets.ssh.target import SshTarget
from tests.support.agent_scripts import RECORDING_AGENT, SYSTEM_PYTHON
from tests.support.agents import fast_options

if TYPE_CHECKING:
    from pathlib import Path

    from integration.sshlab import SshLab

pytestmark = pytest.mark.anyio

SSH_BOUNDS = {"read_timeout_ms": 10_000, "initialize_floor_ms": 20_000, "stop_grace_ms": 1_000}
MISSING_SHELLS = [name for name, path in SHELLS.items() if not os.path.exists(path)]


def hostile_names(pwned: Path) -> list[str]:
    """Workspace names (relative to a directory of the user's) that broke shells before."""
    return [
        f"a\\'; touch {pwned}; echo '",
        "dbl\\\\back",
        f"$(touch {pwned})",
        f"`touch {pwned}`",
        "new\nline",
        "-lead",
        "bang!hist !! $HOME ~",
        'dq "x" \\"; touch PWNED; "',
    ]


def hostile_words(pwned: Path) -> list[str]:
    return [
        "it\\'s",
        "a\\\\b",
        "'single'",
        '"double"',
        f"$(touch {pwned})",
        f"; touch {pwned}",
        "!!",
        "line1\nline2",
        "",
        "-n",
        "ünï",
    ]


def carried(pwned: Path) -> dict[str, str]:
    return {
        "RA_T_QUOTE": "it\\'s \"q\" 'x'",
        "RA_T_BACK": "\\\\ \\n \\",
        "RA_T_CMD": f"$(touch {pwned}) `touch {pwned}` ; touch {pwned}",
        "RA_T_LINES": "one\ntwo\n",
        "RA_T_BANG": "!! !$ {a,b}",
    }


def options(command: list[str] | str, **overrides: object) -> SessionOptions:
    return fast_options(command, **{**SSH_BOUNDS, **overrides})


def user_target(lab: SshLab, user: User, environ: dict[str, str], **settings: object) -> SshTarget:
    return SshTarget(
        user.destination("lab1"),
        SshSettings(config_file=str(lab.config), **settings),  # type: ignore[arg-type]
        environ=environ,
    )


@pytest.fixture(autouse=True)
def private_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMOTE_ACP_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("shell", list(SHELLS))
async def test_every_login_shell_runs_hostile_data_as_data(ssh_lab: SshLab, homes: Path, shell: str) -> None:
    assert SYSTEM_PYTHON is not None
    assert shell not in MISSING_SHELLS, f"{SHELLS[shell]} is missing: scripts/test installs it"
    with throwaway_user(ssh_lab.client_key.with_suffix(".pub"), shell=login_shell(shell, homes), base=homes) as user:
        pwned = user.home / "PWNED"
        values = {**carried(pwned), "PYTHONPATH": str(agent_pythonpath())}
        environ = {**os.environ, **values}
        target = user_target(ssh_lab, user, environ, pass_env=tuple(values))
        words = hostile_words(pwned)
        dump = user.home / "dump.json"

        for index, name in enumerate(hostile_names(pwned)):
            workspace = user.makedirs(user.home / "ws" / name)
            record = user.home / f"dump-{index}.json"
            command = [SYSTEM_PYTHON, "-c", RECORDING_AGENT, str(record), *words]
            async with open_session(str(workspace), options(command), target=target) as s:
                assert s.session_id
            seen = json.loads(record.read_text())
            assert seen["cwd"] == str(workspace), (shell, name)
            assert seen["argv"] == words, (shell, name)
            assert {k: seen["env"].get(k) for k in values} == values, (shell, name)
        # (an assignment then a test: what csh and fish would refuse)
        fragment = f'x=1; [ "$x" = 1 ] || exit 9; exec {SYSTEM_PYTHON} -c "$0" {dump}'
        workspace = user.home / "ws" / "-lead"
        async with open_session(str(workspace), options(fragment.replace("$0", RECORDING_AGENT)), target=target) as s:
            result = await s.run_turn("hi", lambda event: None)
            assert result.ok and result.last_message == "hi"
        assert json.loads(dump.read_text())["cwd"] == str(workspace)
        assert not pwned.exists()
        assert not list(user.home.rglob("PWNED")), "an input ran a command on the host"
