"""``remote-acp run --reattach-window SECONDS``: what it refuses (as the command, a process of its
own), and how it reaches the ssh settings of a run on one destination or placed on the fleet."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click
import pytest

from remote_acp.cli.run_remote import remote_start
from remote_acp.config import load_workflow
from remote_acp.fleet.check import host_target
from remote_acp.targets.ssh.target import SshTarget
from tests.support.cli import AGENT, cli

if TYPE_CHECKING:
    from pathlib import Path

LOCAL_ONLY = (
    "--reattach-window applies to a run on a host (--host, or worker.ssh_hosts in the workflow): "
    "a local session has no link to lose"
)


@pytest.mark.process
def test_a_local_run_with_a_window_is_a_usage_error_and_starts_nothing(tmp_path: Path) -> None:
    done = cli("run", "--agent", AGENT, "--workspace", str(tmp_path), "--reattach-window", "60", "hi")
    assert done.returncode == 2, done.stderr
    assert LOCAL_ONLY in done.stderr
    assert done.stdout == "" and "Traceback" not in done.stderr


@pytest.mark.process
def test_a_local_workflow_run_with_the_flag_is_the_same_usage_error(tmp_path: Path) -> None:
    workflow = tmp_path / "w.yaml"
    workflow.write_text(f"agent:\n  command: {AGENT}\n")
    done = cli("run", "--config", str(workflow), "--workspace", str(tmp_path), "--reattach-window", "60", "hi")
    assert done.returncode == 2, done.stderr
    assert LOCAL_ONLY in done.stderr


@pytest.mark.process
@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("0", "Invalid value for '--reattach-window': 0 is not in the range x>=1."),
        ("-1", "Invalid value for '--reattach-window': -1 is not in the range x>=1."),
        ("1.5", "Invalid value for '--reattach-window': '1.5' is not a valid integer range."),
        ("10m", "Invalid value for '--reattach-window': '10m' is not a valid integer range."),
        ("604801", "Invalid value for '--reattach-window': 604801 is more than 604800 seconds (7 days)"),
    ],
)
def test_a_window_that_is_no_whole_count_of_seconds_up_to_a_week_is_a_usage_error(value: str, said: str) -> None:
    done = cli("run", "--agent", "a", "--host", "build", "--workspace", "/tmp", "--reattach-window", value, "hi")
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr


def test_the_help_names_the_flag_and_its_unit() -> None:
    from click.testing import CliRunner

    from remote_acp.cli.main import cli as command

    shown = CliRunner().invoke(command, ["run", "--help"])
    assert shown.exit_code == 0
    assert "--reattach-window SECONDS" in shown.output


# -- the settings a run on a host gets ----------------------------------------------------------

INVENTORY = """\
hosts:
  build-1: {address: 10.0.0.1, user: ci, capacity: 3, groups: [build]}
  build-2: {address: 10.0.0.2, groups: [build]}
"""


@pytest.fixture
def inventory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    path = tmp_path / "inventory.yaml"
    path.write_text(INVENTORY)
    monkeypatch.setenv("REMOTE_ACP_INVENTORY", str(path))
    return str(path)


def start(selector: str, given: dict[str, Any], workflow_text: str | None = None, tmp_path: Path | None = None) -> Any:
    workflow = None
    if workflow_text is not None:
        assert tmp_path is not None
        (tmp_path / "w.yaml").write_text(workflow_text)
        workflow = load_workflow(tmp_path / "w.yaml")
    return remote_start(
        (selector,),
        given,
        workflow,
        workspace="/srv/repo",
        named_by="--host",
        resume=None,
        inventory=(None, "none", ()),
    )


def test_the_window_reaches_the_target_of_one_destination(inventory: str) -> None:
    target, pool = start("ci@10.0.0.7", {"reattach_window_s": 120})
    assert pool is None and isinstance(target, SshTarget)
    assert target.settings.reattach_window_s == 120
    target, _ = start("ci@10.0.0.7", {"reattach_window_s": None})
    assert isinstance(target, SshTarget) and target.settings.reattach_window_s is None  # not given: none


def test_the_window_reaches_every_host_a_placed_run_may_start_on(inventory: str) -> None:
    target, pool = start("@build", {"reattach_window_s": 300})
    assert target is None and pool is not None
    assert pool.settings.reattach_window_s == 300
    for host in pool.hosts:
        placed = host_target(host, pool.settings, take_slot=True)
        assert placed.settings.reattach_window_s == 300
        assert placed.settings.capacity == host.capacity  # the host's own settings still added


def test_the_flag_overrides_the_workflows_window_and_the_workflows_applies_without_it(
    inventory: str, tmp_path: Path
) -> None:
    text = "agent:\n  command: qwen --acp\nworker:\n  ssh_hosts: ['@build']\n  ssh_reattach_window_s: 900\n"
    _, pool = start("@build", {"reattach_window_s": None}, text, tmp_path)
    assert pool is not None and pool.settings.reattach_window_s == 900
    _, pool = start("@build", {"reattach_window_s": 45}, text, tmp_path)
    assert pool is not None and pool.settings.reattach_window_s == 45


def test_a_window_the_settings_refuse_is_a_usage_error_naming_the_setting(inventory: str) -> None:
    # What the flag's own check lets through never reaches here; a library caller's dict can.
    with pytest.raises(click.UsageError, match=r"^reattach_window_s must be at least 1$"):
        start("ci@10.0.0.7", {"reattach_window_s": 0})
