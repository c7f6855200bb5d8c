"""``remote-acp validate``, ``run --config`` and ``check host --config`` as real processes: every
finding code from a real file with its text and exit status, a WORKFLOW.md whose body is the
prompt of a run, a file with errors that starts nothing, and ``--version`` loading none of it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from remote_acp.config import check_file
from tests.support.config_cases import CASES, Case, expected_text, write_case
from tests.support.startup import modules_after_version

if TYPE_CHECKING:
    from pathlib import Path

CLI = [sys.executable, "-m", "remote_acp.cli.main"]
AGENT = f"{sys.executable} -m remote_acp.testing.scripted_agent"


def cli(*args: str, cwd: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120, check=False)


@pytest.mark.parametrize("case", CASES, ids=[c.code for c in CASES])
def test_validate_reports_each_code_with_its_text_and_status(case: Case, tmp_path: Path) -> None:
    source = write_case(case, tmp_path)
    status = 1 if case.severity == "error" else 0
    done = cli("validate", source)
    assert done.returncode == status, done.stderr
    text = expected_text(case, source)
    lines = done.stdout.splitlines()
    assert text in lines
    # the command prints what the library finds, finding for finding
    assert lines[:-1] == [f.text for f in check_file(source).findings]
    assert lines[-1].startswith(f"{source}: {'not valid' if status else 'valid'}: ")

    as_json = cli("validate", "--json", source)
    assert as_json.returncode == status
    document = json.loads(as_json.stdout)
    assert document["file"] == source and document["valid"] is (status == 0)
    (finding,) = [f for f in document["findings"] if f["code"] == case.code]
    assert finding == {
        "code": case.code,
        "severity": case.severity,
        "key": case.key,
        "line": case.line,
        "message": case.message,
        "text": text,
    }


def test_a_clean_file_is_valid_and_exits_0(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("agent:\n  command: qwen --acp\n")
    done = cli("validate", str(path))
    assert (done.returncode, done.stdout) == (0, f"{path}: valid: 0 errors, 0 warnings\n")


def test_validate_reads_workflow_md_here_by_default_and_a_missing_file_is_usage(tmp_path: Path) -> None:
    missing = cli("validate", cwd=str(tmp_path))
    assert missing.returncode == 2 and "no workflow file 'WORKFLOW.md'" in missing.stderr
    assert cli("validate", str(tmp_path / "nope.yaml")).returncode == 2
    assert cli("validate", "--no-such-flag").returncode == 2
    (tmp_path / "WORKFLOW.md").write_text("---\nagent:\n  command: qwen --acp\n---\nHello\n")
    done = cli("validate", cwd=str(tmp_path))
    assert (done.returncode, done.stdout) == (0, "WORKFLOW.md: valid: 0 errors, 0 warnings\n")


def test_a_workflow_md_drives_run_and_its_body_is_the_prompt(workspace: str, tmp_path: Path) -> None:
    record = tmp_path / "rec.jsonl"
    workflow = tmp_path / "WORKFLOW.md"
    workflow.write_text(
        "---\n"
        "agent:\n"
        f"  command: {AGENT} --record {record}\n"
        "  effort: high\n"
        "  stop_grace_ms: 2000\n"
        "tracker:\n  kind: linear\n"
        "---\n"
        "Say hello from the workflow\n"
    )
    done = cli("run", "--config", str(workflow), "--workspace", workspace)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Say hello from the workflow\n"
    warnings = [f.logged for f in check_file(str(workflow)).warnings]
    assert len(warnings) == 2  # the effort key and the scheduler's block
    for text in warnings:
        assert f"warning: {text}" in done.stderr.splitlines()
    prompts = [json.loads(line) for line in record.read_text().splitlines()]
    sent = [m["params"]["prompt"][0]["text"] for m in prompts if m.get("method") == "session/prompt"]
    assert sent == ["Say hello from the workflow"]

    # a PROMPT given wins over the body, and a flag over the file
    again = cli("run", "--config", str(workflow), "--workspace", workspace, "--agent", AGENT, "from the flag")
    assert again.returncode == 0, again.stderr
    assert again.stdout == "from the flag\n"
    assert len(record.read_text().splitlines()) == len(prompts)  # the file's agent (recording) did not run


def test_run_with_a_workflow_with_errors_starts_nothing_and_exits_2(workspace: str, tmp_path: Path) -> None:
    record = tmp_path / "rec.jsonl"
    workflow = tmp_path / "w.yaml"
    workflow.write_text(f"agent:\n  command: {AGENT} --record {record}\nagent-client-protocol:\n  mcp_config: 7\n")
    done = cli("run", "--config", str(workflow), "--workspace", workspace, "hello")
    assert done.returncode == 2
    (error,) = check_file(str(workflow)).errors
    assert error.code == "agent-client-protocol.mcp_config.wrong_type"
    assert error.text in done.stderr.splitlines()
    assert "nothing was started" in done.stderr
    assert not record.exists() and done.stdout == ""


def test_run_without_agent_or_prompt_is_usage(workspace: str, tmp_path: Path) -> None:
    assert "give the agent" in cli("run", "--workspace", workspace, "hi").stderr
    workflow = tmp_path / "w.yaml"
    workflow.write_text("agent:\n  command: qwen --acp\n")
    done = cli("run", "--config", str(workflow), "--workspace", workspace)
    assert done.returncode == 2 and "no PROMPT given; the workflow file has no prompt" in done.stderr
    assert cli("run", "--config", str(tmp_path / "none.yaml"), "hi").returncode == 2


def closed_port() -> int:
    with socket.socket() as s:  # bound, never listening: a connect is refused at once
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def isolated(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    base = {k: v for k, v in os.environ.items() if k != "REMOTE_ACP_INVENTORY"}
    return base | {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "REMOTE_ACP_CACHE_DIR": str(tmp_path / "cache"),
    }


def test_check_host_takes_agent_and_hosts_from_the_workflow(isolated: dict[str, str], tmp_path: Path) -> None:
    target = f"root@127.0.0.1:{closed_port()}"
    workflow = tmp_path / "w.yaml"
    workflow.write_text(f"agent:\n  command: qwen --acp\nworker:\n  ssh_hosts: ['{target}']\n")
    done = cli("check", "host", "--config", str(workflow), "--workspace", "/w", "--json", env=isolated)
    assert done.returncode == 20, done.stderr
    (obj,) = [json.loads(line) for line in done.stdout.splitlines()]
    assert obj["host"] == target and obj["verdict"] == "unreachable"
    for finding in check_file(str(workflow)).warnings:  # launched over ssh: the usage advisories
        assert f"warning: {finding.logged}" in done.stderr.splitlines()


def test_check_host_with_a_workflow_with_errors_exits_2(isolated: dict[str, str], tmp_path: Path) -> None:
    workflow = tmp_path / "w.yaml"
    workflow.write_text("agent:\n  command: qwen --acp\n  max_turns: 0\nworker:\n  ssh_hosts: [h1]\n")
    done = cli("check", "host", "--config", str(workflow), "--workspace", "/w", env=isolated)
    assert done.returncode == 2
    (error,) = check_file(str(workflow)).errors
    assert error.text in done.stderr.splitlines() and done.stdout == ""
    local = tmp_path / "local.yaml"
    local.write_text("agent:\n  command: qwen --acp\n")
    done = cli("check", "host", "--config", str(local), "--workspace", "/w", env=isolated)
    assert done.returncode == 2 and "the workflow has no worker.ssh_hosts" in done.stderr


def test_version_and_a_plain_start_load_no_configuration_machinery() -> None:
    loaded = modules_after_version("remote_acp.cli.run, remote_acp.session")
    assert [m for m in loaded if m.split(".")[0] in ("pydantic", "yaml") or m.startswith("remote_acp.config")] == []
    assert "remote_acp.cli.run" in loaded  # the plain start's own modules were imported


def test_a_fifo_is_refused_unread_rather_than_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "WORKFLOW.md"
    os.mkfifo(fifo)  # nobody writes: reading it would wait forever
    done = cli("validate", str(fifo))
    assert done.returncode == 1, done.stderr
    assert "file.unreadable" in done.stdout and "cannot be read: not a regular file" in done.stdout


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            "agent:\n  command: a\nwhen: 2024-13-45\n",
            "a value YAML cannot construct: ValueError: month must be in 1..12",
        ),
        ("agent: " + "[" * 5000 + "]" * 5000 + "\n", "the document nests too deeply"),
    ],
)
def test_yaml_that_the_constructors_refuse_is_a_syntax_finding_not_a_traceback(
    text: str, reason: str, tmp_path: Path
) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(text)
    done = cli("validate", str(path))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "[yaml.syntax]" in done.stdout and reason in done.stdout


def test_a_workflows_warnings_are_logged_once_labelled(tmp_path: Path) -> None:
    import subprocess
    import sys

    workflow = tmp_path / "WORKFLOW.md"
    workflow.write_text("---\nagent:\n  command: 'true'\nworker:\n  ssh_hosts: [nowhere.invalid]\n---\nhi\n")
    done = subprocess.run(
        [sys.executable, "-m", "remote_acp.cli.main", "run", "--config", str(workflow), "--workspace", "/tmp"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    warned = [line for line in done.stderr.splitlines() if "[agent.kind." in line]
    assert warned and all(line.startswith(f"warning: {workflow}:2: agent.kind: ") for line in warned), warned
    assert not any(": warning: " in line for line in warned)
