"""``remote-acp run --wait-for-slot`` against a real sshd host of capacity 1: a placed run that finds
every slot held fails at once without it (``at_capacity``, retryable, exit 5), and with it waits,
saying so, until the slot frees (the run holding it ends), then runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from integration.users import agent_pythonpath, throwaway_user
from tests.support.agent_scripts import RECORD_PID, SYSTEM_PYTHON, host_agent_script
from tests.support.agents import wait_until
from tests.support.processes import alive

if TYPE_CHECKING:
    from pathlib import Path

    from integration.sshlab import SshLab

pytestmark = pytest.mark.anyio

CLI = [sys.executable, "-m", "remote_acp.cli.main"]
AGENT = (RECORD_PID, "agent")


def final(out: str) -> dict[str, Any]:
    return next(line for line in map(json.loads, out.splitlines()) if line["type"] == "run_result")


async def test_a_full_host_fails_at_once_or_is_waited_for(ssh_lab: SshLab, homes: Path, tmp_path: Path) -> None:
    assert SYSTEM_PYTHON is not None
    with throwaway_user(ssh_lab.client_key.with_suffix(".pub"), base=homes) as user:
        user.write("agent", host_agent_script(*AGENT, python=SYSTEM_PYTHON, pythonpath=agent_pythonpath()), mode=0o755)
        user.makedirs(user.home / "ws")
        inventory = tmp_path / "inventory.yaml"
        inventory.write_text(f"hosts:\n  solo:\n    address: lab1\n    user: {user.name}\n    capacity: 1\n")
        env = os.environ | {"REMOTE_ACP_CACHE_DIR": str(tmp_path / "cache")}

        def argv(*more: str) -> list[str]:
            return [
                *CLI, "run", "--host", "solo", "--inventory", str(inventory), "--ssh-config", str(ssh_lab.config),
                "--workspace", str(user.home / "ws"), "--agent", f"{user.home}/agent", *more,
            ]  # fmt: skip

        def agents() -> list[int]:
            pids = user.home / "pids"
            return [int(p.name[4:]) for p in pids.glob("pid-*") if alive(int(p.name[4:]))] if pids.exists() else []

        # The holder keeps the slot until the test interrupts it, once the waiter said it waits:
        # the order is the events', whatever the machine's load.
        holder = await anyio.open_process(argv("--json", "@sleep=600 held"), env=env, stderr=subprocess.DEVNULL)
        waiter: anyio.abc.Process | None = None
        try:
            await wait_until(lambda: len(agents()) == 1, within=60)

            with anyio.fail_after(120):
                refused = await anyio.run_process(argv("--json", "hi"), env=env, check=False)
            result = final(refused.stdout.decode())
            assert refused.returncode == 5, refused.stderr
            assert (result["error_kind"], result["cause"], result["retryable"]) == ("port_exit", "at_capacity", True)

            started = time.monotonic()
            waiter = await anyio.open_process(argv("--wait-for-slot", "90", "hi"), env=env, stdout=subprocess.DEVNULL)
            assert waiter.stderr is not None
            said = ""
            with anyio.fail_after(60):
                while "waiting for a free agent slot" not in said:
                    said += (await waiter.stderr.receive()).decode(errors="replace")
            holder.send_signal(signal.SIGINT)  # the holder's session ends: its slot frees
            with anyio.fail_after(60):
                assert await holder.wait() == 130
            with anyio.fail_after(120):
                async for piece in waiter.stderr:
                    said += piece.decode(errors="replace")
                assert await waiter.wait() == 0, said
            assert "at capacity: solo" in said
            assert time.monotonic() - started < 90
        finally:
            for process in (holder, waiter):
                if process is None:
                    continue
                if process.returncode is None:
                    process.kill()
                with anyio.move_on_after(60):
                    await process.wait()
                await process.aclose()
        await wait_until(lambda: not agents(), within=30)
