"""Workflow files through the library's loader: every finding code provoked from a real file, with
its key path, line and text; what a checked workflow gives a session.

The same files go through ``remote-acp validate`` in ``tests/test_cli_validate.py`` (the CASES
below), which checks that the command prints the very same text.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

import pytest

from remote_acp.config import ConfigError, Workflow, check_file, load_workflow
from remote_acp.options import SessionOptions
from tests.support.config_cases import ALL_CODES, CASES, Case, expected_text, write_case

if TYPE_CHECKING:
    from pathlib import Path


def test_every_code_has_a_case() -> None:
    assert {case.code for case in CASES} == ALL_CODES


@pytest.mark.parametrize("case", CASES, ids=[c.code for c in CASES])
def test_the_loader_reports_each_code(case: Case, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    source = write_case(case, tmp_path)
    found = [f for f in check_file(source).findings if f.code == case.code]
    assert len(found) == 1, check_file(source).findings
    (finding,) = found
    assert (finding.severity, finding.key, finding.line, finding.message) == (
        case.severity,
        case.key,
        case.line,
        case.message,
    )
    assert finding.text == expected_text(case, source)
    if case.severity == "error":
        with pytest.raises(ConfigError) as raised:
            load_workflow(source)
        assert finding.text in str(raised.value).splitlines()
    else:
        with caplog.at_level(logging.WARNING, logger="remote_acp.config"):
            workflow = load_workflow(source)
        assert finding.logged in [r.getMessage() for r in caplog.records if r.name == "remote_acp.config"]
        assert finding in workflow.warnings


def test_a_clean_file_has_no_finding_and_the_contract_defaults(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("agent:\n  kind: agent-client-protocol\n  command: qwen --acp\n")
    assert check_file(path).findings == ()
    workflow = load_workflow(path)
    agent = workflow.config.agent
    assert (agent.max_turns, agent.max_sessions, agent.max_concurrent_agents) == (20, 0, 10)
    assert (agent.turn_timeout_ms, agent.read_timeout_ms, agent.stall_timeout_ms) == (3_600_000, 5_000, 300_000)
    assert (agent.stop_grace_ms, agent.max_retry_backoff_ms, agent.max_tokens) == (5_000, 300_000, None)
    assert workflow.prompt is None and not workflow.remote
    assert workflow.session_options() == SessionOptions(command="qwen --acp")


def test_session_options_carry_the_file_and_overrides_win(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    path = tmp_path / "conf" / "WORKFLOW.md"
    path.write_text(
        "---\n"
        "agent:\n"
        "  command: [qwen, --acp]\n"
        "  read_timeout_ms: 0\n"
        "  turn_timeout_ms: 1000\n"
        "  stall_timeout_ms: -1\n"
        "  max_concurrent_agents_by_state: {Todo: 2}\n"
        "agent-client-protocol:\n"
        "  mcp_config: tools/mcp.json\n"
        "  fs_read: true\n"
        "---\n\n"
        "Fix the build.\n\nThen run the tests.\n"
    )
    workflow = load_workflow(path)
    assert workflow.prompt == "Fix the build.\n\nThen run the tests."
    assert workflow.config.agent.max_concurrent_agents_by_state == {"todo": 2}
    options = workflow.session_options()
    assert options.command == ["qwen", "--acp"]
    assert options.read_timeout_ms == 30_000  # zero or less: the contract's fallback
    assert (options.turn_timeout_ms, options.stall_timeout_ms) == (1000, -1)
    assert options.mcp_config == os.path.join(str(tmp_path / "conf"), "tools/mcp.json")
    assert options.fs_read and not options.fs_write
    overridden = workflow.session_options(command="other --acp", turn_timeout_ms=5, read_timeout_ms=None)
    assert (overridden.command, overridden.turn_timeout_ms, overridden.read_timeout_ms) == ("other --acp", 5, 30_000)


def test_an_absolute_mcp_config_stays_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("agent:\n  command: qwen --acp\nagent-client-protocol:\n  mcp_config: /etc/mcp.json\n")
    assert load_workflow(path).session_options().mcp_config == "/etc/mcp.json"


def test_worker_block_gives_ssh_settings_and_the_launch_is_remote(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(
        "agent:\n  command: qwen --acp\n"
        "worker:\n  ssh_hosts: '@build'\n  ssh_pass_env: [OPENAI_API_KEY]\n  ssh_strict_host_key_checking: yes\n"
    )
    workflow = load_workflow(path)
    assert isinstance(workflow, Workflow) and workflow.remote and workflow.ssh_hosts == ("@build",)
    settings = workflow.ssh_settings()
    assert (settings.host_key_policy, settings.pass_env) == ("yes", ("OPENAI_API_KEY",))
    assert workflow.ssh_settings(pass_env=("OTHER",), connect_timeout_s=3).pass_env == ("OTHER",)


def test_the_reattach_window_key_reaches_the_ssh_settings_and_a_flag_overrides_it(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("agent:\n  command: qwen --acp\nworker:\n  ssh_hosts: [b1]\n  ssh_reattach_window_s: 900\n")
    workflow = load_workflow(path)
    assert not [f for f in workflow.warnings if f.code.startswith("worker.")]
    assert workflow.ssh_settings().reattach_window_s == 900
    assert workflow.ssh_settings(reattach_window_s=60).reattach_window_s == 60
    assert workflow.ssh_settings(reattach_window_s=None).reattach_window_s == 900  # no flag: the file's
    unset = tmp_path / "u.yaml"
    unset.write_text("agent:\n  command: qwen --acp\nworker:\n  ssh_hosts: [b1]\n  ssh_reattach_window_s:\n")
    assert load_workflow(unset).ssh_settings().reattach_window_s is None  # null: no window


def test_the_workflow_bound_of_the_reattach_window_is_the_settings_bound() -> None:
    from remote_acp.config.models import MAX_REATTACH_WINDOW_S as in_workflows
    from remote_acp.targets.ssh.settings import MAX_REATTACH_WINDOW_S as in_settings

    assert in_workflows == in_settings == 604_800


@pytest.mark.parametrize(
    ("value", "code", "message"),
    [
        ("0", "value.out_of_range", "must be at least 1, got 0"),
        ("-60", "value.out_of_range", "must be at least 1, got -60"),
        ("604801", "value.out_of_range", "must be at most 604800 (7 days), got 604801"),
        ("'600'", "value.wrong_type", "must be an integer, got a string (write the number without quotes)"),
        ("1.5", "value.wrong_type", "must be an integer, got a number"),
        ("true", "value.wrong_type", "must be an integer, got a boolean"),
        ("10m", "value.wrong_type", "must be an integer, got a string"),
        ("[60]", "value.wrong_type", "must be an integer, got a list"),
    ],
)
def test_a_bad_reattach_window_is_reported_with_its_key_path_and_line(
    value: str, code: str, message: str, tmp_path: Path
) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(f"agent:\n  command: qwen --acp\nworker:\n  ssh_hosts: [b1]\n  ssh_reattach_window_s: {value}\n")
    checked = check_file(path)
    assert [(f.code, f.severity, f.key, f.line, f.message) for f in checked.errors] == [
        (code, "error", "worker.ssh_reattach_window_s", 5, message)
    ]
    with pytest.raises(ConfigError) as raised:
        load_workflow(path)
    assert str(raised.value) == f"{path}:5: error: worker.ssh_reattach_window_s: {message} [{code}]"


def test_a_file_with_several_problems_reports_them_all_in_file_order(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(
        "agent:\n  command: qwen --acp\n  max_turns: 0\n  reasoning_effort: low\n"
        "agent-client-protocol:\n  mcp_config: 3\n  fs_writ: true\n"
    )
    checked = check_file(path)
    assert [(f.line, f.code) for f in checked.findings] == [
        (3, "value.out_of_range"),
        (4, "agent.effort.not_forwarded"),
        (6, "agent-client-protocol.mcp_config.wrong_type"),
        (7, "key.unknown"),
    ]
    assert checked.findings[3].message == "unknown key; did you mean fs_write?"
    assert checked.config is None
    with pytest.raises(ConfigError) as raised:
        load_workflow(path)
    assert str(raised.value) == "\n".join(f.text for f in checked.errors)


def test_a_markdown_file_without_front_matter_is_all_prompt(tmp_path: Path) -> None:
    path = tmp_path / "WORKFLOW.md"
    path.write_text("Just a prompt.\n")
    checked = check_file(path)
    assert checked.prompt == "Just a prompt."
    assert [(f.code, f.key) for f in checked.errors] == [("value.missing", "agent")]


def test_the_allow_list_reaches_the_local_target(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("agent:\n  command: qwen --acp\nagent-client-protocol:\n  env_allowlist: [OPENAI_API_KEY]\n")
    assert load_workflow(path).local_target().env_allowlist == ("OPENAI_API_KEY",)
    path.write_text("agent:\n  command: qwen --acp\n")
    assert load_workflow(path).local_target().env_allowlist is None


def test_the_schedulers_limits_are_handed_over_as_written(tmp_path: Path) -> None:
    from remote_acp.config import SchedulingLimits, load_workflow

    path = tmp_path / "w.yaml"
    path.write_text(
        "agent:\n  command: qwen --acp\n  max_turns: 7\n  max_sessions: 3\n  max_concurrent_agents: 2\n"
        "  max_concurrent_agents_by_state:\n    Review: 1\n"
    )
    assert load_workflow(str(path)).scheduling == SchedulingLimits(7, 3, 2, {"review": 1})
