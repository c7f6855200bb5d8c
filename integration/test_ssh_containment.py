"""A controller killed with SIGKILL mid-turn over real ssh: the local ssh dies with it, the
connection closes, and the remote supervisor takes the remote agent tree down."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from tests.support.processes import alive, gone_within

if TYPE_CHECKING:
    from integration.sshlab import SshLab

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[1]

# A controller: opens an ssh session whose remote agent has a child that left its session,
# starts a long turn, says the local ssh's pid, then waits to be killed.
CONTROLLER = textwrap.dedent(
    """
    import sys, anyio
    from remote_acp import open_session
    from remote_acp.targets.ssh.settings import SshSettings
    from remote_acp.targets.ssh.target import SshTarget
    from tests.support.agents import fast_options, scripted

    async def main(config, pid_file, child_file):
        # It outlives its stdin and SIGTERM: only the connection's end can stop it.
        agent = scripted(
            "--pid-file", pid_file, "--child", "setsid", "--child-pid-file", child_file,
            "--no-stdin-eof-exit", "--ignore-sigterm",
        )
        options = fast_options(agent, read_timeout_ms=5_000, initialize_floor_ms=15_000)
        target = SshTarget("lab1", SshSettings(config_file=config))
        async with open_session("/tmp", options, target=target) as s, anyio.create_task_group() as tg:
            tg.start_soon(s.run_turn, "@sleep=120")
            await anyio.sleep(0.3)
            print(s.pid, flush=True)
            await anyio.sleep(600)

    anyio.run(main, *sys.argv[1:4], backend=sys.argv[4])
    """
)


def pid_in(path: Path) -> int | None:
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return None


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
async def test_controller_killed_mid_turn_over_ssh_leaves_nothing(
    ssh_lab: SshLab, tmp_path: Path, backend: str
) -> None:
    pid_file, child_file = tmp_path / "agent.pid", tmp_path / "child.pid"
    controller = subprocess.Popen(  # noqa: ASYNC220 - started once, its output read in a thread
        [sys.executable, "-c", CONTROLLER, str(ssh_lab.config), str(pid_file), str(child_file), backend],
        stdout=subprocess.PIPE,
        cwd=REPO,
    )
    try:
        assert controller.stdout is not None
        with anyio.fail_after(30):
            line = await anyio.to_thread.run_sync(controller.stdout.readline)
        local_ssh = int(line)
        agent, child = pid_in(pid_file), pid_in(child_file)
        assert agent is not None and child is not None
        assert alive(local_ssh) and alive(agent) and alive(child)
        controller.kill()
        controller.wait()
        assert await gone_within([local_ssh], 10)
        assert await gone_within([agent, child], 15)
    finally:
        controller.kill()
        controller.wait()
        assert controller.stdout is not None
        controller.stdout.close()
