"""Workflow files through the library's loader: every finding code provoked from a real file, with
its key path, line and text; what a checked workflow gives a session.

The same files go through ``remote-acp validate`` in ``tests/test_cli_validate.py`` (the CASES
below), which checks that the command prints the very same text.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from remote_acp.config import ConfigError, Workflow, check_file, load_workflow
from remote_acp.options import SessionOptions

if TYPE_CHECKING:
    from pathlib import Path


@dataclass(frozen=True)
class Case:
    code: str
    file: str
    text: str | bytes
    severity: str
    key: str
    line: int | None
    message: str


SSH = "worker:\n  ssh_hosts: ['@build']\n"

CASES = [
    Case("file.unreadable", "bad.yaml", b"agent:\n  command: \xff\xfe\n", "error", "", None,
         "cannot be read: not UTF-8 text"),
    Case("workflow.front_matter.unterminated", "WORKFLOW.md", "---\nagent:\n  command: qwen --acp\nHello\n",
         "error", "", 1, "the front matter opened by '---' on line 1 is never closed by a '---' line"),
    Case("yaml.syntax", "WORKFLOW.md", "---\nagent:\n  command: qwen --acp\n  max_turns: [1\n---\nbody\n",
         "error", "", 5, "while parsing a flow sequence expected ',' or ']', but got '<stream end>'"),
    Case("yaml.not_mapping", "w.yaml", "- agent\n- worker\n", "error", "", 1,
         "the document is a list, not a mapping of blocks (agent, worker...)"),
    Case("key.unknown", "w.yaml", "agent:\n  command: qwen --acp\n  max_turn: 3\n", "error", "agent.max_turn", 3,
         "unknown key; did you mean max_turns?"),
    Case("key.ignored", "w.yaml", "agent:\n  command: qwen --acp\nwrker:\n  ssh_hosts: [a]\n", "warning", "wrker", 3,
         "is not read by remote-acp; did you mean worker?"),
    Case("value.missing", "w.yaml", "agent:\n  max_turns: 3\n", "error", "agent.command", 1,
         "is required (the runtime with its protocol switch, e.g. 'qwen --acp')"),
    Case("value.wrong_type", "w.yaml", "agent:\n  command: qwen --acp\n  read_timeout_ms: '5000'\n", "error",
         "agent.read_timeout_ms", 3, "must be an integer, got a string (write the number without quotes)"),
    Case("value.out_of_range", "w.yaml", "agent:\n  command: qwen --acp\n  stop_grace_ms: 0\n", "error",
         "agent.stop_grace_ms", 3, "must be at least 1, got 0"),
    Case("value.invalid", "w.yaml", "agent:\n  command: qwen --acp\nworker:\n  ssh_pass_env: [TOKEN, 'A-B']\n",
         "error", "worker.ssh_pass_env[1]", 4, "is not an environment variable name"),
    Case("agent.kind.unsupported", "w.yaml", "agent:\n  kind: codex\n  command: codex app-server\n", "error",
         "agent.kind", 2, "is 'codex': remote-acp drives only agents of the kind agent-client-protocol"),
    Case("agent.command.empty", "w.yaml", "agent:\n  command: '  '\n", "error", "agent.command", 2,
         "is empty or whitespace-only"),
    Case("agent-client-protocol.mcp_config.wrong_type", "WORKFLOW.md",
         "---\nagent:\n  command: qwen --acp\nagent-client-protocol:\n  mcp_config:\n    - a.json\n---\nGo\n",
         "error", "agent-client-protocol.mcp_config", 5,
         "must be a string (the path of an MCP servers JSON file), got a list"),
    Case("agent.effort.not_forwarded", "w.yaml", "agent:\n  command: qwen --acp\n  effort: high\n", "warning",
         "agent.effort", 3,
         "effort setting has no effect for this agent kind (agent-client-protocol forwards none to the runtime)"),
    Case("agent.kind.no_usage_reporting", "w.yaml", "agent:\n  kind: agent-client-protocol\n  command: qwen\n" + SSH,
         "warning", "agent.kind", 2,
         "agent-client-protocol sessions launched over ssh report no token usage"
         " (it is measured where the agent runs)"),
    Case("agent.kind.no_cost_estimate", "w.yaml", "agent:\n  command: qwen --acp\n" + SSH, "warning", "agent.kind", 1,
         "agent-client-protocol sessions launched over ssh get no cost estimate (there is no token usage to price)"),
    Case("agent-client-protocol.local_only", "w.yaml",
         "agent:\n  command: qwen --acp\nagent-client-protocol:\n  fs_read: true\n" + SSH, "warning",
         "agent-client-protocol.fs_read", 4,
         "has no effect over ssh: file-system access is never advertised over ssh (the files are on the host)"),
    Case("worker.ssh_strict_host_key_checking.insecure", "w.yaml",
         "agent:\n  command: qwen --acp\nworker:\n  ssh_strict_host_key_checking: no\n", "warning",
         "worker.ssh_strict_host_key_checking", 4,
         "'no' connects even to a host whose key changed (a host key policy of accept-new or yes refuses it)"),
]  # fmt: skip

ALL_CODES = {
    "file.unreadable", "workflow.front_matter.unterminated", "yaml.syntax", "yaml.not_mapping", "key.unknown",
    "key.ignored", "value.missing", "value.wrong_type", "value.out_of_range", "value.invalid",
    "agent.kind.unsupported", "agent.command.empty", "agent-client-protocol.mcp_config.wrong_type",
    "agent.effort.not_forwarded", "agent.kind.no_usage_reporting", "agent.kind.no_cost_estimate",
    "agent-client-protocol.local_only", "worker.ssh_strict_host_key_checking.insecure",
}  # fmt: skip


def write_case(case: Case, directory: Path) -> str:
    path = directory / case.file
    if isinstance(case.text, bytes):
        path.write_bytes(case.text)
    else:
        path.write_text(case.text)
    return str(path)


def expected_text(case: Case, source: str) -> str:
    where = source if case.line is None else f"{source}:{case.line}"
    subject = f"{case.key}: " if case.key else ""
    return f"{where}: {case.severity}: {subject}{case.message} [{case.code}]"


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
