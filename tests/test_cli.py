"""The ``remote-acp`` command, run as a real process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

AGENT = f"{sys.executable} -m remote_acp.testing.scripted_agent"
CLI = [sys.executable, "-m", "remote_acp.cli.main"]


def cli(*args: str, cwd: str | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=cwd, timeout=timeout, check=False)


def json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()]


def test_version() -> None:
    done = cli("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == "remote-acp, version 0.1.0"


def test_human_run_streams_text_and_ends_with_session_and_outcome(workspace: str) -> None:
    done = cli("run", "--agent", AGENT, "--workspace", workspace, "@chunks=4 @permission hello there", "second turn")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "permission outcome: selected reject\nhello there\nsecond turn\n"
    assert "refused a permission request because this run is unattended" in done.stderr
    assert done.stderr.rstrip().endswith("session sess-1: turn_completed")


def test_workspace_defaults_to_current_directory(workspace: str, tmp_path: Path) -> None:
    dump = tmp_path / "env.json"
    done = cli("run", "--agent", f"{AGENT} --env-dump {dump}", "hi", cwd=workspace)
    assert done.returncode == 0, done.stderr
    assert json.loads(dump.read_text())["__cwd__"] == workspace


def test_json_run_prints_events_turn_results_and_final_result(workspace: str) -> None:
    done = cli("run", "--json", "--agent", AGENT, "--workspace", workspace, "@tool one", "two")
    assert done.returncode == 0, done.stderr
    lines = json_lines(done.stdout)
    types = [line["type"] for line in lines]
    assert types == [
        "session_started", "notification", "tool_result", "notification", "notification", "turn_completed",
        "turn_result",
        "session_started", "notification", "notification", "turn_completed", "turn_result",
        "run_result",
    ]  # fmt: skip
    assert lines[-1] == {
        "type": "run_result",
        "session_id": "sess-1",
        "outcome": "turn_completed",
        "error_kind": None,
        "message": "the agent completed the turn",
        "obtained": "new",
    }
    assert str(lines[1]["message"]).startswith("this session started with a declared capability gap in:")
    assert lines[3]["delta"] == "one" and lines[4]["message"] == "one"
    assert all(str(line.get("timestamp", "Z")).endswith("Z") for line in lines)


def test_run_stops_at_first_failing_turn(workspace: str, tmp_path: Path) -> None:
    record = tmp_path / "rec.jsonl"
    done = cli("run", "--json", "--agent", f"{AGENT} --record {record}", "--workspace", workspace,
               "@stop=refusal no", "never sent")  # fmt: skip
    assert done.returncode == 7
    final = json_lines(done.stdout)[-1]
    assert final["outcome"] == "turn_failed" and final["error_kind"] == "turn_refused"
    prompts = [m for m in json_lines(record.read_text()) if m.get("method") == "session/prompt"]
    assert len(prompts) == 1


@pytest.mark.parametrize(
    ("agent", "prompt", "code", "kind"),
    [
        ("remote-acp-no-such-agent --acp", "hi", 3, "agent_not_found"),
        (f"{AGENT} --init-error=-32000", "hi", 4, "credential_unverified"),
        (f"{AGENT} --crash-at initialize", "hi", 5, "port_exit"),
        (AGENT, "@crash=2", 5, "port_exit"),
        (AGENT, "@stop=max_turn_requests", 6, "turn_request_limit"),
        (AGENT, "@stop=max_tokens", 7, "turn_token_limit"),
    ],
)
def test_exit_status_per_error_class(workspace: str, agent: str, prompt: str, code: int, kind: str) -> None:
    done = cli("run", "--json", "--agent", agent, "--workspace", workspace, prompt)
    assert done.returncode == code, done.stderr
    assert json_lines(done.stdout)[-1]["error_kind"] == kind


def test_invalid_workspace(tmp_path: Path) -> None:
    done = cli("run", "--agent", AGENT, "--workspace", str(tmp_path / "missing"), "hi")
    assert done.returncode == 3
    assert "invalid_workspace_cwd" in done.stderr and "does not exist" in done.stderr


def test_bad_bound_is_a_usage_error(workspace: str) -> None:
    done = cli("run", "--agent", AGENT, "--read-timeout-ms", "0", "hi")
    assert done.returncode == 2
    assert "read_timeout_ms" in done.stderr


def test_turn_timeout_flag(workspace: str) -> None:
    done = cli("run", "--json", "--agent", AGENT, "--workspace", workspace, "--turn-timeout-ms", "300",
               "--read-timeout-ms", "300", "@sleep=30")  # fmt: skip
    assert done.returncode == 6
    assert json_lines(done.stdout)[-1]["error_kind"] == "turn_timeout"


def test_json_logs_carry_structured_fields(workspace: str) -> None:
    done = cli("--log-level", "info", "--log-format", "json", "run", "--agent", AGENT, "--workspace", workspace, "hi")
    assert done.returncode == 0
    records = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    impl = [r for r in records if r["message"] == "agent implementation"]
    assert len(impl) == 1
    assert impl[0]["session_id"] == "sess-1" and impl[0]["host"] == "local"
    assert impl[0]["component"] == "session" and impl[0]["agent_name"] == "scripted-agent"
    assert isinstance(impl[0]["pid"], int)


def test_interrupt_cancels_the_turn_and_tears_down(workspace: str, tmp_path: Path) -> None:
    pid_file = tmp_path / "agent.pid"
    proc = subprocess.Popen(
        [*CLI, "run", "--json", "--agent", f"{AGENT} --pid-file {pid_file}", "--workspace", workspace, "@sleep=30"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 10
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=15)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130
    lines = json_lines(out)
    assert lines[-2]["type"] == "turn_result" and lines[-2]["error_kind"] == "turn_cancelled"
    assert lines[-1]["message"] == "interrupted"
    agent_pid = int(pid_file.read_text())
    assert not os.path.exists(f"/proc/{agent_pid}") or "Z" in Path(f"/proc/{agent_pid}/stat").read_text().split()[2]


def test_sessions_are_recorded_and_resumed(workspace: str, tmp_path: Path) -> None:
    state = tmp_path / "agent-state"
    state.mkdir()
    agent = f"{AGENT} --state-dir {state} --advertise load"
    first = cli("run", "--json", "--agent", agent, "--workspace", workspace, "remember this")
    assert first.returncode == 0, first.stderr
    saved = json_lines(first.stdout)[-1]["session_id"]

    listed = cli("sessions", "--json", "--workspace", workspace)
    assert listed.returncode == 0
    records = json_lines(listed.stdout)
    assert [(r["session_id"], r["target"], r["workspace"], r["outcome"]) for r in records] == [
        (saved, "local", workspace, "turn_completed")
    ]

    # Human output hides the replayed history unless asked; the run says how it got its session.
    again = cli("run", "--agent", agent, "--workspace", workspace, "--resume", "last", "and go on")
    assert again.returncode == 0, again.stderr
    assert again.stdout == "and go on\n"
    shown = cli("run", "--agent", agent, "--workspace", workspace, "--resume", str(saved), "--show-replay", "more")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("remember this\n")
    resumed = cli("run", "--json", "--agent", agent, "--workspace", workspace, "--resume", str(saved), "last one")
    final = json_lines(resumed.stdout)[-1]
    assert final["session_id"] == saved and final["obtained"] == "loaded"
    table = cli("sessions", "--workspace", workspace)
    assert table.returncode == 0 and str(saved) in table.stdout and "loaded" in table.stdout


def test_resume_last_without_a_saved_session_is_a_usage_error(workspace: str) -> None:
    done = cli("run", "--agent", AGENT, "--workspace", workspace, "--resume", "last", "hi")
    assert done.returncode == 2
    assert "no saved session" in done.stderr
