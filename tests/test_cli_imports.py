"""What the command loads, and when: sub-commands load when named (their short help comes from the
table in ``remote_acp.cli.main``), ``--version`` and ``--help`` load none of them, and a plain
local run loads neither ssh, nor the inventory, nor a workflow file's machinery. (The import graph
itself, cycles, private names and the reasons of deferred imports, is tests/test_import_graph.py's.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING

import click
import pytest
from click.testing import CliRunner

from remote_acp.cli.main import COMMANDS, cli
from remote_acp.targets.process.fork_server import USABLE
from tests.support.startup import modules_after_version

if TYPE_CHECKING:
    from pathlib import Path

COMMAND_MODULES = {target.partition(":")[0] for target, _ in COMMANDS.values()}


def test_help_lists_each_command_as_its_own_help_says_it() -> None:
    runner = CliRunner()
    listed = runner.invoke(cli, ["--help"])
    assert listed.exit_code == 0, listed.output
    shown = listed.output.split("Commands:\n")[1].splitlines()
    assert [line.split()[0] for line in shown] == sorted(COMMANDS)
    group = click.Context(cli)
    for name in COMMANDS:
        command = cli.get_command(group, name)
        assert command is not None and command.help is not None
        for limit in range(10, 130):
            from_table = click.Command(name, help=COMMANDS[name][1]).get_short_help_str(limit)
            assert from_table == command.get_short_help_str(limit), (name, limit)


def test_an_unknown_command_is_matched_against_every_command() -> None:
    done = CliRunner().invoke(cli, ["chek"])
    assert done.exit_code == 2
    assert "No such command 'chek'. Did you mean 'check'?" in done.output


def modules_after(*args: str, env: dict[str, str] | None = None) -> tuple[str, set[str]]:
    """What ``remote-acp ARGS`` printed, and the modules it had loaded when it exited."""
    probe = (
        "import json, sys, runpy\n"
        f"sys.argv = ['remote-acp', *{list(args)!r}]\n"
        "try:\n    runpy.run_module('remote_acp.cli.main', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, env=env)
    return done.stdout, set(json.loads(done.stderr.splitlines()[-1]))


@pytest.mark.process
def test_version_and_help_load_no_command_nor_its_setup() -> None:
    setup = {"remote_acp.cli.logging_setup", "remote_acp.cli.streams", "anyio", "remote_acp.errors"}
    assert sorted((COMMAND_MODULES | setup) & set(modules_after_version())) == []
    printed, loaded = modules_after("--help")
    assert "Commands:" in printed
    assert sorted((COMMAND_MODULES | setup) & loaded) == []


@pytest.mark.process
def test_the_listings_load_neither_the_event_loop_nor_what_only_another_branch_needs(tmp_path: Path) -> None:
    env = {**os.environ, "REMOTE_ACP_STATE_DIR": str(tmp_path / "state"), "REMOTE_ACP_INVENTORY": str(tmp_path / "i")}
    (tmp_path / "i").write_text("hosts:\n  b1:\n    address: 10.0.0.1\n")
    printed, loaded = modules_after("sessions", "--json", env=env)
    assert printed == ""
    assert sorted(m for m in loaded if m.startswith(("anyio", "hostinv.inventory", "rich"))) == []
    printed, loaded = modules_after("inventory", "list", "--no-ssh-config", env=env)
    assert printed.split()[:2] == ["host", "destination"]
    assert sorted(m for m in loaded if m.startswith(("anyio", "remote_acp.fleet", "remote_acp.cli.check"))) == []
    printed, loaded = modules_after("inventory", "list", "--no-ssh-config", "--json", env=env)
    assert json.loads(printed)["name"] == "b1"
    assert sorted(m for m in loaded if m.startswith("rich")) == []


# The first launch request the run sends (the agent's start, to the supervisors' launcher) records
# what was loaded by then.
PLAIN_RUN = """
import json, runpy, socket, sys
send = socket.socket.sendmsg
def first_request(sock, *args, **kwargs):
    if not hasattr(sys, "before_launch"):
        sys.before_launch = sorted(sys.modules)
    return send(sock, *args, **kwargs)
socket.socket.sendmsg = first_request
sys.argv = ["remote-acp", "run", "--agent", sys.argv[1], "--workspace", sys.argv[2], "hi"]
try:
    runpy.run_module("remote_acp.cli.main", run_name="__main__")
except SystemExit as exc:
    print(json.dumps([exc.code, getattr(sys, "before_launch", None), sorted(sys.modules)]), file=sys.stderr)
"""


@pytest.mark.process
@pytest.mark.skipif(not USABLE, reason="no supervisors' launcher here (no pidfd_open)")
def test_a_plain_local_run_loads_neither_ssh_nor_the_inventory_nor_a_workflow_file(workspace: str) -> None:
    agent = f"{sys.executable} -m remote_acp.testing.scripted_agent"
    done = subprocess.run(
        [sys.executable, "-c", PLAIN_RUN, agent, workspace], capture_output=True, text=True, timeout=60, check=True
    )
    code, before_launch, loaded = json.loads(done.stderr.splitlines()[-1])
    assert (code, done.stdout) == (0, "hi\n"), done.stderr
    unneeded = (
        "remote_acp.config",
        "remote_acp.fleet",
        "remote_acp.targets.ssh.target",
        "remote_acp.cli.run_remote",
        "remote_acp.cli.placement",
        "hostinv.inventory",
        "pydantic",
        "yaml",
        "rich",
    )
    assert [m for m in loaded if m.startswith(unneeded)] == []
    # The session history is written once the agent has run: where it lives is not looked up first.
    assert before_launch is not None
    assert [m for m in before_launch if m.startswith(("remote_acp.paths", "platformdirs"))] == []
    assert "platformdirs" in loaded  # the session was recorded
