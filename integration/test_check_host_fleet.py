"""``remote-acp check host`` over a fleet of six real hosts, the command run as a real process.

One run, in inventory order, over hosts that each fail (or pass) for a reason of their own:

- ``ready``: the scriptable agent, on the PATH a session gets, answers ``initialize`` and
  ``session/new``;
- ``down``: nobody listens on its port;
- ``changed``: the test's known_hosts holds another key for it;
- ``login-only``: the agent is only on the login PATH (the user's ``~/.profile`` adds its directory);
- ``no-credential``: the real qwen-code, with no API key anywhere (not in the environment ssh
  gives it, not in the fresh ``~/.qwen`` of its user), answers ``session/new`` with ``-32000``;
- ``behind-jump``: the lab's hidden host, reached only through the namespaced host (``ProxyJump``).

The agent is one name, ``fleet-agent``, which each throwaway user's dotfiles resolve to what its
host calls for. Every run reads a known_hosts file and an ssh_config of the test's own, so the
lab's files are never changed. Each agent writes its pid, so the test sees that the handshakes'
teardown left none running; nor may any lab host keep a session, nor any throwaway user a process.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hostinv.causes import CAUSES, Cause
from integration.sshlab import SshLab, free_port
from integration.users import SHELLS, User, agent_pythonpath, for_others, throwaway_user, uid_processes
from remote_acp.fleet.report import TABLE_COLUMNS
from tests.support.agent_scripts import SYSTEM_PYTHON, host_agent_script
from tests.support.agents import wait_until
from tests.support.check_output import read_check_output
from tests.support.processes import alive
from tests.support.qwen import default_settings

if TYPE_CHECKING:
    from collections.abc import Iterator

    from integration.sshlab import SshHost

pytestmark = [pytest.mark.anyio, pytest.mark.qwen, pytest.mark.usefixtures("qwen_installed")]

CLI = [sys.executable, "-m", "remote_acp.cli.main"]
AGENT = "fleet-agent"
NAMES = ["ready", "down", "changed", "login-only", "no-credential", "behind-jump"]
LOCAL_KEY = "sk-local-only-fleet-check"
HIDDEN = "fleet-hidden"  # not lab*: the lab's ssh_config block for lab* must not apply to it
JSON_KEYS = {
    "type",
    "host",
    "destination",
    "verdict",
    "ready",
    "message",
    "fix",
    "error_kind",
    "cause",
    "retryable",
    "latency_ms",
    "probe_age_s",
    "handshake",
    "os",
    "arch",
    "kernel",
    "cores",
    "load",
    "mem_available_kib",
    "disk_free_kib",
    "agent_path",
    "agent_name",
    "agent_version",
    "auth_required",
}
# ``exec`` keeps the pid, so the agent's pid file names the process the session started.
SCRIPTED = "agent --name scripted --agent-version 1.0 --pid-file {pids}/pid-$$"
# qwen re-executes itself under a second node process: the uid's processes show that both went.
QWEN = """#!/bin/sh
case "$1" in --acp) echo $$ > {pids}/pid-$$; exec {qwen} --acp --auth-type=openai ;; esac
exec {qwen} "$@"
"""


@dataclass(frozen=True)
class Users:
    """``agent`` and ``behind``: fleet-agent on the session's PATH (``~/.bashrc``, which bash
    reads for an ssh command); ``login``: only on the login PATH (``~/.profile``); ``qwen``:
    fleet-agent is qwen.

    The lab's hosts are one machine, whose agent slots (``capacity``) are the account's: the
    ready host and the one behind the jump host log in as two users, as if they were two machines,
    so their handshakes never wait for each other's slot."""

    agent: User
    behind: User
    login: User
    qwen: User
    base: Path
    pids: Path
    workspace: Path

    def all(self) -> list[User]:
        return [self.agent, self.behind, self.login, self.qwen]


@pytest.fixture(scope="module")
def users(ssh_lab: SshLab, qwen_installed: Path) -> Iterator[Users]:
    assert SYSTEM_PYTHON is not None
    # qwen-code (144 MB) runs as a throwaway user, who must reach it: from the checkout's .tools,
    # or from a copy where the checkout lies under a directory closed to others.
    qwen_exe = for_others(qwen_installed, qwen_installed.parents[2])
    base = Path(tempfile.mkdtemp(prefix="ra-fleet-"))
    base.chmod(0o755)
    # Shared by every user of the fleet: one workspace for the command, one place for pids.
    pids, workspace = base / "pids", base / "ws"
    for shared in (pids, workspace):
        shared.mkdir()
        shared.chmod(0o777)
    key = ssh_lab.client_key.with_suffix(".pub")
    bashrc = {".bashrc": 'PATH="$HOME/bin:$PATH"; export PATH\n'}
    profile = {".profile": 'PATH="$HOME/tools:$PATH"; export PATH\n'}
    scripted = host_agent_script(
        SCRIPTED.format(pids=shlex.quote(str(pids))), python=SYSTEM_PYTHON, pythonpath=agent_pythonpath()
    )
    # A fresh ~/.qwen with the suite's quiet settings: no key in it, so qwen has none anywhere.
    settings = default_settings()
    assert not {"security", "auth"} & set(settings), settings
    try:
        with (
            throwaway_user(key, shell=SHELLS["bash"], base=base, dotfiles=bashrc) as agent,
            throwaway_user(key, shell=SHELLS["bash"], base=base, dotfiles=bashrc) as behind,
            throwaway_user(key, shell=SHELLS["bash"], base=base, dotfiles=profile) as login,
            throwaway_user(key, shell=SHELLS["bash"], base=base, dotfiles=bashrc) as qwen,
        ):
            agent.write(f"bin/{AGENT}", scripted, mode=0o755)
            behind.write(f"bin/{AGENT}", scripted, mode=0o755)
            login.write(f"tools/{AGENT}", scripted, mode=0o755)
            qwen.write(f"bin/{AGENT}", QWEN.format(qwen=shlex.quote(str(qwen_exe)), pids=pids), mode=0o755)
            qwen.write(".qwen/settings.json", json.dumps(settings, indent=2) + "\n")
            yield Users(agent, behind, login, qwen, base, pids, workspace)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def hidden(ssh_lab: SshLab) -> SshHost:
    """A host only the namespaced host can reach; started once per module."""
    return ssh_lab.start_hidden(HIDDEN)


def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """A short local command (ssh-keygen), waited for in the test's thread."""
    return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False)


class Fleet:
    """The test's own known_hosts (``lab2`` under another key), ssh_config (the lab's, plus the
    hidden host's block) and inventory of the six hosts, and the command run over them."""

    def __init__(self, lab: SshLab, users: Users, hidden: SshHost, root: Path) -> None:
        self.lab, self.users, self.hidden = lab, users, hidden
        self.known_hosts = root / "known_hosts"
        lab2 = lab.host("lab2")
        known = [h.known_hosts_line for h in lab.hosts if h is not lab2]
        known += [SshLab.other_key_line(lab2, root), hidden.known_hosts_line]
        self.known_hosts.write_text("".join(f"{line}\n" for line in known))
        self.config = lab.config_variant(root / "ssh_config", known_hosts=self.known_hosts)
        block = lab.hidden_config_block(hidden).replace(str(lab.known_hosts), str(self.known_hosts))
        self.config.write_text(self.config.read_text() + "\n" + block)
        self.down_port = free_port("127.0.0.1")
        entries = {
            "ready": ("lab1", users.agent.name),
            "down": ("127.0.0.1", "root"),
            "changed": ("lab2", users.agent.name),
            "login-only": ("lab3", users.login.name),
            "no-credential": ("lab1", users.qwen.name),
            "behind-jump": (HIDDEN, users.behind.name),
        }
        assert list(entries) == NAMES
        lines = ["hosts:"]
        for name, (address, user) in entries.items():
            port = f", port: {self.down_port}" if name == "down" else ""
            lines.append(f"  {name}: {{address: {address}{port}, user: {user}, groups: [fleet]}}")
        self.inventory = root / "inventory.yaml"
        self.inventory.write_text("\n".join(lines) + "\n")
        # A key in the local environment stays there: only --ssh-pass-env would carry it.
        self.env = os.environ | {
            "REMOTE_ACP_CACHE_DIR": str(root / "cache"),
            "COLUMNS": "250",
            "OPENAI_API_KEY": LOCAL_KEY,
        }

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        argv = [
            *CLI,
            "check",
            "host",
            *args,
            "--agent",
            f"{AGENT} --acp",
            "--workspace",
            str(self.users.workspace),
            "--inventory",
            str(self.inventory),
            "--ssh-config",
            str(self.config),
            "--connect-timeout",
            "15",
            "--handshake-timeout-ms",
            "60000",  # qwen takes seconds to answer initialize, more on a loaded machine
        ]
        return subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=240, check=False)

    def json(self, *args: str) -> tuple[int, list[dict[str, Any]]]:
        done = self.run(*args, "--json")
        assert done.stdout, done.stderr
        assert LOCAL_KEY not in done.stdout + done.stderr
        return done.returncode, [json.loads(line) for line in done.stdout.splitlines()]

    def agent_pids(self) -> list[int]:
        return [int(p.read_text()) for p in self.users.pids.glob("pid-*")]

    async def nothing_left(self) -> None:
        """Every agent started is gone, no host's sshd has a session left, no user a process."""
        pids = self.agent_pids()
        await wait_until(lambda: not any(alive(pid) for pid in pids), within=30)
        for host in [*self.lab.hosts, self.hidden]:
            await wait_until(lambda host=host: not host.session_processes(), within=30)  # type: ignore[misc]
        for user in self.users.all():
            await wait_until(lambda user=user: not uid_processes(user.uid), within=30)  # type: ignore[misc]


@pytest.fixture
def fleet(ssh_lab: SshLab, users: Users, hidden: SshHost, tmp_path: Path) -> Iterator[Fleet]:
    for stale in users.pids.glob("pid-*"):  # the previous test's: it checked them already
        stale.unlink()
    yield Fleet(ssh_lab, users, hidden, tmp_path)


async def test_one_run_over_six_hosts_gives_each_its_verdict_message_and_fix(fleet: Fleet) -> None:
    status, objs = fleet.json("@fleet")
    hosts = {o["host"]: o for o in objs}
    summary = {o["host"]: (o["verdict"], o["message"]) for o in objs}
    # each host once, streamed as its check ends (the table keeps the inventory's order)
    assert sorted(o["host"] for o in objs) == sorted(NAMES), summary
    assert status == 21, summary  # some host reached is not ready
    for obj in objs:
        # every key present for every host, null when unknown (others may join the ones read here)
        assert set(obj) == set(objs[0]) and JSON_KEYS <= set(obj), obj
        assert obj["type"] == "host_check" and obj["ready"] is (obj["verdict"] == "ready")
    users = fleet.users

    ready = hosts["ready"]
    assert ready["verdict"] == "ready", summary
    assert ready["destination"] == f"{users.agent.name}@lab1"
    assert (ready["handshake"], ready["fix"], ready["error_kind"]) == (True, None, None)
    assert (ready["cause"], ready["retryable"]) == (None, None)
    assert (ready["agent_name"], ready["agent_version"]) == ("scripted", "1.0")
    assert "scripted 1.0 answered initialize and opened a session" in ready["message"]
    assert ready["auth_required"] is False and "it lists no auth methods" in ready["message"]
    assert ready["agent_path"] == f"{users.agent.home}/bin/{AGENT}"
    assert ready["os"] == "Linux" and ready["cores"] >= 1 and len(ready["load"]) == 3

    down = hosts["down"]
    assert down["verdict"] == "unreachable", summary
    # ssh's own words: with the handshake, the probe runs in the session's login (OpenSSH's)
    assert f"connect to host 127.0.0.1 port {fleet.down_port}: Connection refused" in down["message"], down
    assert (down["error_kind"], down["cause"], down["retryable"]) == ("port_exit", "connect_refused", True)
    assert down["fix"] == CAUSES[Cause.CONNECT_REFUSED].fix and "sshd" in down["fix"]
    assert (down["handshake"], down["os"], down["agent_path"]) == (False, None, None)

    changed = hosts["changed"]
    lab2 = fleet.lab.host("lab2")
    name = f"[{lab2.address}]:{lab2.port}"
    assert changed["verdict"] == "host_key_changed", summary
    assert (changed["error_kind"], changed["cause"], changed["retryable"]) == ("port_exit", "host_key_changed", False)
    assert f"{users.agent.name}@lab2" in changed["message"], changed
    # the fix is ssh-keygen's own removal, quoted for a shell, as its last words
    fix = f"ssh-keygen -f {shlex.quote(str(fleet.known_hosts))} -R {shlex.quote(name)}"
    assert changed["fix"].endswith(": " + fix), changed["fix"]
    assert (changed["handshake"], changed["os"]) == (False, None)

    login_only = hosts["login-only"]
    tools = f"{users.login.home}/tools"
    assert login_only["verdict"] == "agent_not_found", summary
    assert f"interactive login shell finds it in {tools}" in login_only["message"]
    assert login_only["fix"].startswith(f"add {tools} to PATH in ~/.bashrc"), login_only["fix"]
    assert login_only["fix"].endswith(f"{tools}/{AGENT}")
    assert (login_only["handshake"], login_only["agent_path"]) == (False, None)
    assert (login_only["cause"], login_only["retryable"]) == ("agent_not_found", False)

    refused = hosts["no-credential"]
    assert refused["verdict"] == "credential_unverified", summary
    assert refused["error_kind"] == "credential_unverified"
    # initialize answered before session/new refused: the row names the agent it talked to
    assert refused["handshake"] is True and refused["agent_name"], refused
    # qwen's own words: the credential it lacks and where it would have taken one from
    assert "Missing API key" in refused["message"] and "OPENAI_API_KEY" in refused["message"], refused
    assert (refused["cause"], refused["retryable"]) == ("credential_refused", False)
    assert refused["fix"] == CAUSES[Cause.CREDENTIAL_REFUSED].fix
    assert refused["agent_path"] == f"{users.qwen.home}/bin/{AGENT}"

    behind = hosts["behind-jump"]
    assert behind["verdict"] == "ready", summary
    assert behind["destination"] == f"{users.behind.name}@{HIDDEN}"
    assert (behind["agent_name"], behind["agent_version"], behind["handshake"]) == ("scripted", "1.0", True)
    assert (behind["cause"], behind["retryable"], behind["fix"]) == (None, None, None)
    assert behind["agent_path"] == f"{users.behind.home}/bin/{AGENT}"

    # ready, no-credential and behind-jump were started; the others were stopped by the probe
    assert len(fleet.agent_pids()) == 3
    await fleet.nothing_left()

    # the fix is exact: run as printed (and the new key accepted), the host is ready
    done = run(shlex.split(fix))
    assert done.returncode == 0 and "found: line" in done.stdout, done.stdout + done.stderr
    status, (again,) = fleet.json("changed")
    assert (status, again["verdict"]) == (0, "ready"), again
    assert name in fleet.known_hosts.read_text()  # accept-new wrote the host's real key back
    await fleet.nothing_left()


async def test_the_table_lists_the_six_hosts_in_inventory_order(fleet: Fleet) -> None:
    done = fleet.run("@fleet")
    assert done.returncode == 21, done.stdout + done.stderr
    out = read_check_output(done.stdout)
    assert out.header == list(TABLE_COLUMNS)
    assert out.header[:3] == ["host", "verdict", "latency"] and TABLE_COLUMNS[-1] == "agent"
    assert list(out.rows) == NAMES, done.stdout
    verdicts = {name: row["verdict"] for name, row in out.rows.items()}
    assert verdicts == {
        "ready": "ready",
        "down": "unreachable",
        "changed": "host_key_changed",
        "login-only": "agent_not_found",
        "no-credential": "credential_unverified",
        "behind-jump": "ready",
    }, done.stdout
    for name in ("ready", "behind-jump"):
        row = out.rows[name]
        assert row["os/arch"].startswith("Linux/") and row["agent"] == "scripted 1.0", row
    # after the table, each host that is not ready: its reason, and its fix whole (run as printed)
    assert {name: d.verdict for name, d in out.details.items()} == {
        name: verdict for name, verdict in verdicts.items() if verdict != "ready"
    }, done.stdout
    lab2 = fleet.lab.host("lab2")
    keygen = f"ssh-keygen -f {shlex.quote(str(fleet.known_hosts))} -R {shlex.quote(f'[{lab2.address}]:{lab2.port}')}"
    changed_fix = out.details["changed"].fix
    assert changed_fix is not None and changed_fix.endswith(": " + keygen), out.details["changed"]
    login_fix = out.details["login-only"].fix
    assert login_fix is not None and login_fix.startswith(f"add {fleet.users.login.home}/tools to PATH")
    assert "Missing API key" in out.details["no-credential"].message
    await fleet.nothing_left()
