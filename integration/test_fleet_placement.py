"""Sessions placed on the fleet, against real sshd hosts: a host's capacity held across separate
``remote-acp`` processes, ``check host`` seeing a full host, and placement falling over from a
host whose start fails (an agent that dies starting; a host that went down after its probe).

The hosts' sessions run as throwaway users, so their agent slots (``/tmp/remote-acp-slots-UID``
on the host, which every lab host shares here: they are one machine) are the test's alone. The
agent is the scripted agent under the system's python3, which those users can run.
"""

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

from hostinv import Host
from integration.sshlab import SshLab
from integration.users import User, agent_pythonpath, throwaway_user
from remote_acp.errors import ErrorKind
from remote_acp.fleet import HostPool
from remote_acp.options import SessionOptions
from remote_acp.targets.ssh.settings import SshSettings
from tests.support.agent_scripts import RECORD_PID, SYSTEM_PYTHON, host_agent_argv, host_agent_script
from tests.support.agents import wait_until
from tests.support.processes import alive

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.anyio

CLI = [sys.executable, "-m", "remote_acp.cli.main"]
# The agent answers the probe's --version; started for a session, it records its pid (one file
# per agent), then becomes the scripted agent. With
# --crash-once, the first agent started by any host of the user crashes during initialize.
AGENT = (
    RECORD_PID,
    'if [ "$1" = --crash-once ] && mkdir "$HOME/crashed" 2>/dev/null; then agent --crash-at initialize; fi',
    "agent",
)


@pytest.fixture
def user(ssh_lab: SshLab, homes: Path) -> Iterator[User]:
    assert SYSTEM_PYTHON is not None
    with throwaway_user(ssh_lab.client_key.with_suffix(".pub"), base=homes) as u:
        u.write("agent", host_agent_script(*AGENT, python=SYSTEM_PYTHON, pythonpath=agent_pythonpath()), mode=0o755)
        u.makedirs(u.home / "ws")
        yield u


class Fleet:
    """An inventory of lab hosts as ``user``, and the CLI run against it."""

    def __init__(self, lab: SshLab, user: User, root: Path, hosts: dict[str, tuple[str, int]]) -> None:
        self.lab, self.user = lab, user
        self.inventory = root / "inventory.yaml"
        self.inventory.write_text(
            "hosts:\n"
            + "".join(
                f"  {name}:\n    address: {alias}\n    user: {user.name}\n    capacity: {capacity}\n"
                "    groups: [pair]\n"
                for name, (alias, capacity) in hosts.items()
            )
        )
        self.env = os.environ | {"REMOTE_ACP_CACHE_DIR": str(root / "cache")}

    def argv(self, host: str, *prompts: str, agent_args: str = "") -> list[str]:
        return [
            *CLI,
            "run",
            "--json",
            "--host",
            host,
            "--inventory",
            str(self.inventory),
            "--ssh-config",
            str(self.lab.config),
            "--workspace",
            str(self.user.home / "ws"),
            "--agent",
            f"{self.user.home}/agent {agent_args}".strip(),
            *prompts,
        ]

    def start(self, host: str, *prompts: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.argv(host, *prompts), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env
        )

    def run(self, host: str, *prompts: str, agent_args: str = "") -> tuple[int, list[dict[str, Any]]]:
        done = subprocess.run(
            self.argv(host, *prompts, agent_args=agent_args),
            capture_output=True,
            text=True,
            env=self.env,
            timeout=120,
            check=False,
        )
        return done.returncode, [json.loads(line) for line in done.stdout.splitlines()]

    def check(self, host: str) -> tuple[int, dict[str, Any]]:
        argv = [
            *CLI,
            "check",
            "host",
            host,
            "--json",
            "--no-handshake",
            "--agent",
            f"{self.user.home}/agent",
            "--workspace",
            str(self.user.home / "ws"),
            "--inventory",
            str(self.inventory),
            "--ssh-config",
            str(self.lab.config),
        ]
        done = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=120, check=False)
        return done.returncode, json.loads(done.stdout)

    def agents(self) -> list[int]:
        pids = self.user.home / "pids"
        return [int(p.name.removeprefix("pid-")) for p in pids.glob("pid-*")] if pids.exists() else []

    def running_agents(self) -> list[int]:
        return [pid for pid in self.agents() if alive(pid)]


def result(lines: list[dict[str, Any]]) -> dict[str, Any]:
    return next(line for line in lines if line["type"] == "run_result")


async def test_separate_controllers_never_run_more_agents_than_the_hosts_capacity(
    ssh_lab: SshLab, user: User, tmp_path: Path
) -> None:
    fleet = Fleet(ssh_lab, user, tmp_path, {"shared": ("lab1", 2)})
    runs = [fleet.start("shared", "@sleep=120 held") for _ in range(4)]
    try:
        # Every run either holds an agent now or has given up.
        await wait_until(lambda: len(fleet.running_agents()) + sum(r.poll() is not None for r in runs) == 4, within=90)
        refused = [r for r in runs if r.poll() is not None]
        holding = [r for r in runs if r.poll() is None]
        assert len(refused) == 2 and len(fleet.running_agents()) == 2
        for run in refused:
            out, _ = run.communicate(timeout=30)
            final = result([json.loads(line) for line in out.splitlines()])
            assert run.returncode == 5, final
            assert (final["outcome"], final["error_kind"]) == ("start_failed", "port_exit")
            # Refused by the slots at start, or, when its probe came after two agents had started,
            # by the probe's count of them: either way it never ran a third agent.
            assert (
                "is at capacity: all 2 of its agent slots are held" in final["message"]
                or "shared: [at_capacity] at_capacity (2 agents already run there, its capacity is 2)"
                in final["message"]
            ), final

        status, seen = fleet.check("shared")
        assert (status, seen["verdict"], seen["slots_held"], seen["capacity"]) == (21, "at_capacity", 2, 2), seen
        assert seen["message"] == "2 agents already run there, its capacity is 2"

        # A controller SIGKILLed: its agent goes with it, and so does its slot.
        victim = holding.pop()
        victim.kill()
        victim.communicate(timeout=30)
        await wait_until(lambda: len(fleet.running_agents()) == 1, within=30)
        deadline = time.monotonic() + 30
        while True:  # the slot frees once the host's side of the killed session is gone
            status, lines = fleet.run("shared", "hi")
            if status == 0 or time.monotonic() > deadline:
                break
        assert status == 0, result(lines)
        assert result(lines)["host"] == "shared"
    finally:
        for run in runs:
            if run.poll() is None:
                run.send_signal(signal.SIGINT)
        for run in runs:
            run.communicate(timeout=60)
    await wait_until(lambda: not fleet.running_agents(), within=30)
    await wait_until(lambda: not ssh_lab.host("lab1").session_processes(), within=30)


async def test_a_run_falls_over_to_the_next_host_when_its_start_fails(
    ssh_lab: SshLab, user: User, tmp_path: Path
) -> None:
    fleet = Fleet(ssh_lab, user, tmp_path, {"a": ("lab1", 2), "b": ("lab2", 2)})
    status, lines = fleet.run("@pair", "hi", agent_args="--crash-once")
    assert status == 0, lines
    placement = next(line for line in lines if line["type"] == "placement")
    (failed,) = placement["failed"]
    assert failed["host"] in ("a", "b") and failed["host"] != placement["host"]
    # An agent that exits while starting is not retryable on that host, but another host may
    # start it: the placement falls over.
    assert (failed["error_kind"], failed["cause"], failed["retryable"]) == ("port_exit", "agent_exited", False)
    final = result(lines)
    assert (final["outcome"], final["host"]) == ("turn_completed", placement["host"]), final
    assert len(fleet.agents()) == 2  # the one that crashed, the one that ran
    await wait_until(lambda: not fleet.running_agents(), within=30)


async def test_a_selection_that_matches_nothing_is_a_usage_error(ssh_lab: SshLab, user: User, tmp_path: Path) -> None:
    fleet = Fleet(ssh_lab, user, tmp_path, {"a": ("lab1", 1)})
    done = await anyio.run_process(fleet.argv("@nowhere", "hi"), env=fleet.env, check=False)
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr
    assert "nowhere" in stderr
    assert not fleet.agents()


@pytest.mark.both_backends
async def test_the_pool_falls_over_from_a_host_that_died_after_its_probe(tmp_path: Path, homes: Path) -> None:
    (tmp_path / "lab").mkdir()
    lab = SshLab(tmp_path / "lab").start(2, namespaced=False)
    try:
        assert SYSTEM_PYTHON is not None
        with throwaway_user(lab.client_key.with_suffix(".pub"), base=homes) as u:
            u.makedirs(u.home / "ws")
            hosts = [Host(name=h.alias, address=h.alias, user=u.name, capacity=4) for h in lab.hosts]
            settings = SshSettings(config_file=str(lab.config), connect_timeout_s=5)
            pool = HostPool(hosts, settings=settings, probe_max_age_s=600)
            workspace = str(u.home / "ws")
            first, second = await pool.rank("env", workspace)  # the program the session's command starts
            dead = lab.host(first.name)
            assert dead.process is not None
            dead.process.kill()  # the listener goes: connections are refused from now on
            dead.process.wait()
            command = host_agent_argv(python=SYSTEM_PYTHON, pythonpath=agent_pythonpath())
            async with pool.session(workspace, SessionOptions(command=command)) as placed:
                assert placed.host == second
                (attempt,) = placed.failed
                assert attempt.host == first
                assert (attempt.error.kind, attempt.error.retryable) == (ErrorKind.PORT_EXIT, True)
                assert pool.opened == {second.name: 1}
                outcome = await placed.session.run_turn("hi")
                assert outcome.outcome == "turn_completed"
            assert pool.opened == {}
            # The pool keeps the dead host out at once: the next placement does not try it.
            async with pool.session(workspace, SessionOptions(command=command)) as placed:
                assert (placed.host, placed.failed) == (second, ())
            assert pool.tries == {first.name: 1, second.name: 2}
    finally:
        lab.stop()


async def test_one_workflow_runs_on_its_fleet_selection_and_check_host_reads_it(
    ssh_lab: SshLab, user: User, tmp_path: Path
) -> None:
    """``worker.ssh_hosts`` places ``run --config`` on the fleet, and ``check host --config``
    checks those hosts; the workflow's body is the prompt."""
    fleet = Fleet(ssh_lab, user, tmp_path, {"a": ("lab1", 1), "b": ("lab2", 1)})
    workflow = tmp_path / "WORKFLOW.md"
    workflow.write_text(
        "---\n"
        "agent:\n"
        "  kind: agent-client-protocol\n"
        f"  command: {user.home}/agent\n"
        "worker:\n"
        '  ssh_hosts: ["@pair"]\n'
        "---\n"
        "say the workflow reply\n"
    )
    common = ["--inventory", str(fleet.inventory), "--ssh-config", str(ssh_lab.config)]
    common += ["--workspace", str(user.home / "ws")]
    ran = await anyio.run_process(
        [*CLI, "run", "--json", "--config", str(workflow), *common], env=fleet.env, check=False
    )
    lines = [json.loads(line) for line in ran.stdout.decode().splitlines()]
    assert ran.returncode == 0, ran.stderr.decode()
    placement = next(line for line in lines if line["type"] == "placement")
    assert placement["host"] in ("a", "b") and placement["failed"] == []
    text = "".join(line.get("delta") or "" for line in lines if line["type"] == "notification")
    assert "say the workflow reply" in text  # the scripted agent says back the words of its prompt
    assert result(lines)["host"] == placement["host"]

    checked = await anyio.run_process(
        [*CLI, "check", "host", "--json", "--config", str(workflow), *common], env=fleet.env, check=False
    )
    hosts = {o["host"]: o for o in map(json.loads, checked.stdout.decode().splitlines())}
    assert checked.returncode == 0, checked.stderr.decode()
    assert sorted(hosts) == ["a", "b"] and all(o["verdict"] == "ready" for o in hosts.values())
    await wait_until(lambda: not fleet.running_agents(), within=30)
