"""Workflow files that provoke every finding code, shared by the loader's tests
(``tests/test_config.py``) and the command's (``tests/test_cli_validate.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["ALL_CODES", "CASES", "SSH", "Case", "expected_text", "write_case"]


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
    Case("worker.ssh_reattach_window_s.local_run", "w.yaml",
         "agent:\n  command: qwen --acp\nworker:\n  ssh_pass_env: [A]\n  ssh_reattach_window_s: 600\n", "warning",
         "worker.ssh_reattach_window_s", 5,
         "applies only to a run on a host: this workflow runs on this machine (no worker.ssh_hosts), where a"
         " session has no link to lose"),
]  # fmt: skip

ALL_CODES = {
    "file.unreadable", "workflow.front_matter.unterminated", "yaml.syntax", "yaml.not_mapping", "key.unknown",
    "key.ignored", "value.missing", "value.wrong_type", "value.out_of_range", "value.invalid",
    "agent.kind.unsupported", "agent.command.empty", "agent-client-protocol.mcp_config.wrong_type",
    "agent.effort.not_forwarded", "agent.kind.no_usage_reporting", "agent.kind.no_cost_estimate",
    "agent-client-protocol.local_only", "worker.ssh_strict_host_key_checking.insecure",
    "worker.ssh_reattach_window_s.local_run",
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
