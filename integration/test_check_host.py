"""``remote-acp check host`` against real sshd hosts, the command run as a real process.

One agent command serves every host: a small script that starts the scriptable agent the way
its host calls for, told apart by the server address in ``SSH_CONNECTION`` (lab1 answers like a
good agent, lab2 with protocol version 2, lab3 refuses ``session/new`` with ``-32000``). A fourth
host is down: nobody listens on its port. Each agent writes its pid, so the test sees that the
handshake's teardown left none running, and the lab's sshd have no session left.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest

from hostinv.causes import CAUSES, Cause
from tests.support.agent_scripts import host_agent_script
from tests.support.agents import wait_until
from tests.support.check_output import read_check_output
from tests.support.processes import alive

if TYPE_CHECKING:
    from pathlib import Path

    from integration.sshlab import SshLab

pytestmark = pytest.mark.anyio

CLI = [sys.executable, "-m", "remote_acp.cli.main"]
# Each host's agent is told apart by the address the connection came to.
AGENT = """set -- $SSH_CONNECTION
server=$3
case "$server" in
  {lab2}) agent --pid-file {pids}/pid-"$server" --protocol-version 2 ;;
  {lab3}) agent --pid-file {pids}/pid-"$server" --new-error "-32000:no API key configured" ;;
  *) agent --pid-file {pids}/pid-"$server" --name scripted --agent-version 1.0 --advertise delete ;;
esac"""


class Fleet:
    def __init__(self, lab: SshLab, root: Path) -> None:
        self.lab = lab
        self.pids = root / "pids"
        self.pids.mkdir()
        self.workspace = root / "ws"
        self.workspace.mkdir()
        self.agent = root / "agent"
        self.agent.write_text(
            host_agent_script(
                AGENT.format(pids=self.pids, lab2=lab.host("lab2").address, lab3=lab.host("lab3").address),
                python=sys.executable,
            )
        )
        self.agent.chmod(0o755)
        with socket.socket() as s:  # bound, never listening: every connect is refused
            s.bind(("127.0.0.1", 0))
            self.down_port = int(s.getsockname()[1])
        self.inventory = root / "inventory.yaml"
        self.inventory.write_text(
            f"hosts:\n  down:\n    address: 127.0.0.1\n    port: {self.down_port}\n    user: root\n    groups: [lab]\n"
        )
        self.env = os.environ | {"REMOTE_ACP_CACHE_DIR": str(root / "cache"), "COLUMNS": "250"}

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        argv = [
            *CLI,
            "check",
            "host",
            *args,
            "--agent",
            f"{self.agent} --acp",
            "--workspace",
            str(self.workspace),
            "--inventory",
            str(self.inventory),
            "--ssh-config",
            str(self.lab.config),
            "--connect-timeout",
            "10",
        ]
        return subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=180, check=False)

    def json(self, *args: str) -> tuple[int, dict[str, dict[str, Any]]]:
        done = self.run(*args, "--json")
        objs = [json.loads(line) for line in done.stdout.splitlines()]
        return done.returncode, {o["host"]: o for o in objs}

    async def nothing_left(self) -> None:
        """Every agent started is gone, and no host's sshd has a session left."""
        pids = [int(p.read_text()) for p in self.pids.glob("pid-*")]
        await wait_until(lambda: not any(alive(pid) for pid in pids), within=30)
        for name in ("lab1", "lab2", "lab3"):
            host = self.lab.host(name)
            await wait_until(lambda host=host: not host.session_processes(), within=30)  # type: ignore[misc]


@pytest.fixture
def fleet(ssh_lab: SshLab, tmp_path: Path) -> Fleet:
    return Fleet(ssh_lab, tmp_path)


async def test_each_host_gets_its_verdict_message_and_fix(fleet: Fleet) -> None:
    status, hosts = fleet.json("lab1", "lab2", "lab3", "down")
    assert status == 21, hosts  # some host reached is not ready
    assert sorted(hosts) == ["down", "lab1", "lab2", "lab3"]

    ready = hosts["lab1"]
    assert ready["verdict"] == "ready" and ready["ready"] is True, ready
    assert ready["handshake"] is True and ready["error_kind"] is None
    assert (ready["cause"], ready["retryable"], ready["fix"]) == (None, None, None)
    assert (ready["agent_name"], ready["agent_version"]) == ("scripted", "1.0")
    assert "scripted 1.0 answered initialize and opened a session" in ready["message"]
    assert ready["auth_required"] is False and "it lists no auth methods" in ready["message"]
    assert ready["os"] == "Linux" and ready["cores"] >= 1 and len(ready["load"]) == 3
    assert ready["agent_path"] == str(fleet.agent)

    wrong = hosts["lab2"]
    assert wrong["verdict"] == "incompatible_protocol", wrong
    assert "protocol version 2" in wrong["message"] and "protocol version 1" in wrong["fix"]
    assert (wrong["error_kind"], wrong["cause"], wrong["retryable"]) == (
        "response_error",
        "protocol_incompatible",
        False,
    )
    assert wrong["fix"] == CAUSES[Cause.PROTOCOL_INCOMPATIBLE].fix

    refused = hosts["lab3"]
    assert refused["verdict"] == "credential_unverified", refused
    assert "no API key configured" in refused["message"] and refused["fix"]
    assert refused["error_kind"] == "credential_unverified"
    assert (refused["cause"], refused["retryable"]) == ("credential_refused", False)
    assert refused["fix"] == CAUSES[Cause.CREDENTIAL_REFUSED].fix
    # initialize answered before session/new refused: the row names the agent and its version
    assert (refused["agent_name"], refused["agent_version"]) == ("scripted-agent", "1.0.0")

    down = hosts["down"]
    assert down["verdict"] == "unreachable", down
    assert down["handshake"] is False
    assert (down["error_kind"], down["cause"], down["retryable"]) == ("port_exit", "connect_refused", True)
    assert down["fix"] == CAUSES[Cause.CONNECT_REFUSED].fix
    assert f"port {fleet.down_port}: Connection refused" in down["message"]
    await fleet.nothing_left()
    assert len(list(fleet.pids.glob("pid-*"))) == 3  # one handshake per reachable host


async def test_the_table_lists_the_hosts_in_inventory_order(fleet: Fleet) -> None:
    done = fleet.run("@all")
    assert done.returncode == 21, done.stderr
    out = read_check_output(done.stdout)
    assert out.header[:3] == ["host", "verdict", "latency"] and out.header[-1] == "agent"
    # the inventory's host first, then the ssh_config's aliases, as the file names them
    assert list(out.rows) == ["down", *(h.alias for h in fleet.lab.hosts)], done.stdout
    _, hosts = fleet.json("@all")  # --json streams each host as it ends: the same hosts, any order
    assert set(hosts) == set(out.rows)
    lab1 = out.rows["lab1"]
    assert lab1["verdict"] == "ready" and lab1["os/arch"].startswith("Linux/") and lab1["agent"] == "scripted 1.0"
    verdicts = {"lab2": "incompatible_protocol", "lab3": "credential_unverified", "down": "unreachable"}
    assert {name: out.rows[name]["verdict"] for name in verdicts} == verdicts, done.stdout
    # After the table, a line per host not ready with its reason, and its fix whole, as in --json.
    assert {name: d.verdict for name, d in out.details.items()} == verdicts, done.stdout
    for name, detail in out.details.items():
        assert (detail.message, detail.fix) == (hosts[name]["message"], hosts[name]["fix"]), detail
    await fleet.nothing_left()


async def test_the_exit_status_says_whether_only_connections_failed(fleet: Fleet) -> None:
    assert fleet.run("lab1").returncode == 0
    assert fleet.run("lab1", "down").returncode == 20
    assert fleet.run("lab1", "lab3").returncode == 21
    await fleet.nothing_left()


async def test_without_the_handshake_the_probe_alone_decides(fleet: Fleet) -> None:
    status, hosts = fleet.json("lab2", "--no-handshake")
    assert status == 0, hosts  # a probe cannot see the protocol version: that is what the handshake is for
    assert hosts["lab2"]["verdict"] == "ready" and hosts["lab2"]["handshake"] is False
    assert hosts["lab2"]["agent_version"] == "scripted 1.0"  # from its --version
    assert not list(fleet.pids.glob("pid-*"))  # the agent itself was never started


async def test_a_fresh_probe_is_reused_with_its_age(fleet: Fleet) -> None:
    _, first = fleet.json("lab1", "--no-handshake")
    assert first["lab1"]["probe_age_s"] is None
    _, again = fleet.json("lab1", "--no-handshake", "--max-age", "600")
    assert again["lab1"]["probe_age_s"] is not None and again["lab1"]["probe_age_s"] >= 0
    assert again["lab1"]["latency_ms"] == first["lab1"]["latency_ms"]
    _, fresh = fleet.json("lab1", "--no-handshake")  # the default: probe again
    assert fresh["lab1"]["probe_age_s"] is None
