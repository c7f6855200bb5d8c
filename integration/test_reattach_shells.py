"""The login shell must not matter to a reattach window: for users whose login shells are every
one the suite drives (sh, dash, bash, zsh, ksh, BusyBox ash, fish, csh, tcsh), a session with a
window starts, its turn survives the loss of its ssh (the reconnect's login runs in the same
shell), completes with every chunk once, and the session leaves nothing on the host."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import anyio
import pytest

from integration.users import SHELLS, agent_pythonpath, login_shell, throwaway_user
from remote_acp import open_session
from remote_acp.targets.ssh.settings import SshSettings
from remote_acp.targets.ssh.target import SshTarget
from tests.support.agents import fast_options
from tests.support.reattach_host import HostSession, TurnLog, kill_link_ssh, user_agent

if TYPE_CHECKING:
    from pathlib import Path

    from integration.sshlab import SshLab

pytestmark = pytest.mark.anyio

MISSING_SHELLS = [name for name, path in SHELLS.items() if not os.path.exists(path)]


@pytest.mark.parametrize("shell", list(SHELLS))
async def test_a_windowed_session_survives_a_lost_ssh_whatever_the_login_shell(
    ssh_lab: SshLab, homes: Path, shell: str
) -> None:
    assert shell not in MISSING_SHELLS, f"{SHELLS[shell]} is missing: scripts/test installs it"
    total = 8
    with throwaway_user(ssh_lab.client_key.with_suffix(".pub"), shell=login_shell(shell, homes), base=homes) as user:
        command, environ = user_agent(agent_pythonpath())
        settings = SshSettings(
            config_file=str(ssh_lab.config), reattach_window_s=30, capacity=1, pass_env=("PYTHONPATH",)
        )
        target = SshTarget(user.destination("lab1"), settings, environ=environ)
        options = fast_options(command, read_timeout_ms=10_000, initialize_floor_ms=20_000)
        log = TurnLog()

        async def lose_the_link() -> None:
            await log.until(2, within=20)
            await kill_link_ssh()

        async with open_session(str(user.home), options, target=target) as session:
            assert session.handle is not None
            host = await HostSession.find(session.handle.relay_id)
            with anyio.fail_after(40):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(lose_the_link)
                    result = await session.run_turn(f"@drip={total} @drip-ms=100 @chunks=0", log)
            assert result.ok and result.stop_reason == "end_turn", (shell, result)
            assert log.chunks == list(range(1, total + 1)), (shell, log.chunks)
            assert log.link_events == ["link_lost", "link_restored"], (shell, log.link_events)
        await host.gone(within=15)
