"""``remote-acp check host`` as a real process: usage errors, inventory errors, a host nobody
listens on (the real probe over asyncssh, refused at once), and that ``--version`` loads none of it.

The verdicts of real hosts, with handshakes, are in ``integration/test_check_host.py``."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from tests.support.startup import modules_after_version

if TYPE_CHECKING:
    from pathlib import Path

CLI = [sys.executable, "-m", "remote_acp.cli.main"]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    base = {k: v for k, v in os.environ.items() if k != "REMOTE_ACP_INVENTORY"}
    return base | {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "REMOTE_ACP_CACHE_DIR": str(tmp_path / "cache"),
        "COLUMNS": "200",
    }


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "check", "host", *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def closed_port() -> int:
    with socket.socket() as s:  # bound, never listening: a connect is refused at once
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["nosuch", "--agent", "qwen", "--workspace", "/w"], "no host named 'nosuch'"),
        (["@build", "--agent", "qwen", "--workspace", "/w"], "no host is in the group 'build'"),
        (["-x:22", "--agent", "qwen", "--workspace", "/w"], "No such option"),
        (["h:22", "--agent", " ", "--workspace", "/w"], "--agent is empty"),
        (["h:22", "--agent", "qwen 'x", "--workspace", "/w"], "--agent does not read as a command"),
        (["h:22", "--agent", "qwen", "--workspace", "w"], "--workspace must be an absolute path"),
        (["h:22", "--agent", "qwen", "--workspace", "/w", "--ssh-config", "/nonexistent"], "does not exist"),
        (["h:22", "--agent", "qwen", "--workspace", "/w", "--concurrency", "0"], "--concurrency"),
        (["h:99999", "--agent", "qwen", "--workspace", "/w"], "invalid port"),
        (["--agent", "qwen", "--workspace", "/w"], "Missing argument 'SELECTORS...'"),
    ],
)
def test_usage_errors_exit_2(env: dict[str, str], args: list[str], said: str) -> None:
    done = run(env, *args)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr
    assert done.stdout == ""


def test_an_invalid_inventory_file_exits_10_naming_it(env: dict[str, str], tmp_path: Path) -> None:
    bad = tmp_path / "inv.yaml"
    bad.write_text("hosts:\n  b1:\n    port: nope\n")
    done = run(env, "b1", "--agent", "qwen", "--workspace", "/w", "--inventory", str(bad))
    assert done.returncode == 10, done.stderr
    assert str(bad) in done.stderr and "port" in done.stderr


def test_a_host_nobody_listens_on_is_unreachable_exit_20(env: dict[str, str]) -> None:
    port = closed_port()
    target = f"root@127.0.0.1:{port}"
    done = run(env, target, "--agent", "qwen --acp", "--workspace", "/w", "--json", "--connect-timeout", "5")
    assert done.returncode == 20, done.stderr
    (obj,) = [json.loads(line) for line in done.stdout.splitlines()]
    assert obj["host"] == target and obj["destination"] == target
    assert obj["verdict"] == "unreachable" and obj["ready"] is False
    assert "refused" in obj["message"].lower() and obj["fix"]
    assert obj["handshake"] is False and obj["os"] is None
    table = run(env, target, "--agent", "qwen --acp", "--workspace", "/w", "--connect-timeout", "5")
    assert table.returncode == 20
    header, row, reason, fix = table.stdout.splitlines()
    assert header.split()[:3] == ["host", "verdict", "latency"]
    assert row.startswith(target) and " unreachable " in row
    assert all(len(line) <= 80 for line in (header, row))  # a pipe gets 80 columns, never wider rows
    assert reason.startswith(f"{target} (unreachable): ") and "refused" in reason.lower()
    assert fix == f"  fix: {obj['fix']}"


def test_version_loads_neither_the_fleet_nor_hostinv() -> None:
    loaded = modules_after_version()
    heavy = ("hostinv", "asyncssh", "rich")
    # The cause vocabulary every error carries is hostinv's: that table, and nothing else of it.
    vocabulary = {"hostinv", "hostinv.lazy", "hostinv.causes"}
    # the launch machinery neither: main() raises the open-file limit through remote_acp.targets
    machinery = ("remote_acp.fleet", "remote_acp.cli.check", "remote_acp.targets.launch")
    assert [m for m in loaded if (m.split(".")[0] in heavy and m not in vocabulary) or m.startswith(machinery)] == []


def probe_only_modules(env: dict[str, str], tmp_path: Path, selector: str, *more: str) -> list[str]:
    """The modules a probe-only ``check host`` of a refused host loaded, from a fresh interpreter."""
    modules = tmp_path / "modules.json"
    argv = ["remote-acp", "check", "host", selector, "--agent", "qwen", "--workspace", "/w", "--no-handshake"]
    program = (
        "import json, runpy, sys\n"
        f"sys.argv = {[*argv, '--json', '--connect-timeout', '5', *more]!r}\n"
        "try:\n"
        "    runpy.run_module('remote_acp.cli.main', run_name='__main__')\n"
        "except SystemExit as exc:\n"
        f"    open({str(modules)!r}, 'w').write(json.dumps([exc.code, sorted(sys.modules)]))\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=120)
    code, loaded = json.loads(modules.read_text())
    assert code == 20, done.stderr
    assert json.loads(done.stdout)["verdict"] == "unreachable"
    assert "hostinv.probes.runner" in loaded  # it did probe
    return list(loaded)


def test_a_probe_only_check_loads_no_session_core(env: dict[str, str], tmp_path: Path) -> None:
    # The probe's verdict is the whole check: the session machinery (verification, the session
    # core) stays out of the process, which a fleet-wide check pays for in start-up CPU.
    loaded = probe_only_modules(env, tmp_path, f"root@127.0.0.1:{closed_port()}")
    assert [m for m in loaded if m.startswith("remote_acp.session")] == []


def test_a_probe_only_check_loads_no_unused_parser_nor_the_ssh_target(env: dict[str, str], tmp_path: Path) -> None:
    # Start-up before the first connection: no inventory file and no ssh_config here, so no YAML
    # and no parser of theirs; the ssh settings without the target that would start a session;
    # JSON lines without the event vocabulary a run renders.
    loaded = probe_only_modules(env, tmp_path, f"root@127.0.0.1:{closed_port()}")
    unused = (
        "yaml",
        "hostinv.inventory.own_file",
        "hostinv.inventory.ansible",
        "hostinv.inventory.ssh_config",
        "remote_acp.targets.ssh.target",
        "remote_acp.cli.render",
        "remote_acp.events",
    )
    assert [m for m in unused if m in loaded] == []


def test_a_check_of_our_inventory_loads_no_ansible_parser(env: dict[str, str], tmp_path: Path) -> None:
    # The Ansible parser loads when an Ansible inventory is a source, not for our own file alone.
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(f"hosts:\n  b1:\n    address: 127.0.0.1\n    port: {closed_port()}\n    user: root\n")
    loaded = probe_only_modules(env, tmp_path, "b1", "--inventory", str(inventory))
    assert "hostinv.inventory.own_file" in loaded
    assert "hostinv.inventory.ansible" not in loaded


def test_a_check_of_an_unchanged_inventory_loads_neither_yaml_nor_pydantic(env: dict[str, str], tmp_path: Path) -> None:
    # The merged view is kept under the cache directory: the next check of the same files starts
    # without reading them, so without YAML, pydantic and the parsers (a quarter second of CPU).
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(f"hosts:\n  b1:\n    address: 127.0.0.1\n    port: {closed_port()}\n    user: root\n")
    first = probe_only_modules(env, tmp_path, "b1", "--inventory", str(inventory))
    assert {"yaml", "pydantic", "hostinv.inventory.own_file"} <= set(first)
    again = probe_only_modules(env, tmp_path, "b1", "--inventory", str(inventory))
    heavy = [m for m in again if m.split(".")[0] in ("yaml", "pydantic", "pydantic_core")]
    assert heavy == []
    assert "hostinv.inventory.own_file" not in again
    inventory.write_text(inventory.read_text().replace("user: root", "user: ci"))
    assert "hostinv.inventory.own_file" in probe_only_modules(env, tmp_path, "b1", "--inventory", str(inventory))


def test_json_streams_each_host_and_an_interrupt_keeps_what_is_known_exit_130(env: dict[str, str]) -> None:
    refused = f"root@127.0.0.1:{closed_port()}"
    with socket.socket() as silent:  # accepts (the kernel's backlog) and never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        stalled = f"root@127.0.0.1:{silent.getsockname()[1]}"
        args = [stalled, refused, "--agent", "qwen", "--workspace", "/w", "--json", "--no-handshake"]
        with subprocess.Popen(
            [*CLI, "check", "host", *args, "--connect-timeout", "60"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        ) as proc:
            assert proc.stdout is not None
            first = json.loads(proc.stdout.readline())  # out before the stalled host's verdict
            assert (first["host"], first["verdict"], first["cause"]) == (refused, "unreachable", "connect_refused")
            proc.send_signal(signal.SIGINT)
            rest, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    (second,) = [json.loads(line) for line in rest.splitlines()]
    assert (second["host"], second["verdict"], second["ready"]) == (stalled, "interrupted", False)
    assert "Aborted" not in err


def test_check_host_and_run_select_from_an_ansible_inventory(env: dict[str, str], tmp_path: Path) -> None:
    port = closed_port()
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(f"[web]\nweb1 ansible_host=127.0.0.1 ansible_port={port} ansible_user=root\n")
    done = run(env, "@web", "--agent", "qwen", "--workspace", "/w", "--json", "--no-handshake",
               "--ansible", str(inventory), "--ssh-config", "none")  # fmt: skip
    assert done.returncode == 20, done.stderr
    (obj,) = [json.loads(line) for line in done.stdout.splitlines()]
    assert (obj["host"], obj["destination"]) == ("web1", f"root@127.0.0.1:{port}")
    assert (obj["verdict"], obj["cause"]) == ("unreachable", "connect_refused")
    placed = subprocess.run(
        [*CLI, "run", "--json", "--host", "web1", "--ansible", str(inventory), "--ssh-config", "none",
         "--workspace", "/w", "--agent", "qwen", "hi"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    final = json.loads(placed.stdout.splitlines()[-1])
    assert placed.returncode == 5, placed.stderr
    assert (final["error_kind"], final["cause"], final["retryable"]) == ("port_exit", "connect_refused", True)
    assert [h["host"] for h in final["placement"]["hosts"]] == ["web1"]


def test_the_program_of_an_agent_command_comes_after_its_assignments() -> None:
    from remote_acp.cli.check import agent_program

    assert agent_program(["HOME=/x", "LANG=C", "copilot", "--acp"]) == "copilot"
    assert agent_program(["copilot", "X=1"]) == "copilot"
    assert agent_program(["./bin/a=b"]) == "./bin/a=b"  # a path with '=' is no assignment
    assert agent_program(["1X=2", "q"]) == "1X=2"  # nor a name starting with a digit
