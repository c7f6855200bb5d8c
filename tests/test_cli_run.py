"""``remote-acp run``, run as a real process: what it prints, its exit statuses, its logs, and
how it stays whole when the agent or the output misbehaves."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.cli import AGENT, CLI, cli, json_lines

pytestmark = pytest.mark.process  # the command runs as a process of its own


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
        "cause": None,
        "retryable": False,
        "message": "the agent completed the turn",
        "obtained": "new",
        # The scripted agent is not measured: its turns are counted, never given zero figures.
        "tokens": {
            "measured_turns": 0,
            "unmeasured_turns": 2,
            "input_tokens": None,
            "output_tokens": None,
            "cache_read_tokens": None,
            "total_tokens": None,
            "models": [],
            "max_tokens": None,
            "ceiling": None,
        },
        "load_held_s": None,
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
        # It exits before it answers, as it will on every start: a launch to fix, not a retry.
        (f"{AGENT} --crash-at initialize", "hi", 3, "port_exit"),
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
    pid_file, record = tmp_path / "agent.pid", tmp_path / "received.jsonl"
    agent = f"{AGENT} --pid-file {pid_file} --record {record}"
    proc = subprocess.Popen(
        [*CLI, "run", "--json", "--agent", agent, "--workspace", workspace, "@sleep=30"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 10
        while b"session/prompt" not in (record.read_bytes() if record.exists() else b""):  # the turn is on
            assert time.monotonic() < deadline, "the agent never got the prompt"
            time.sleep(0.02)
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


# --------------------------------------------------------------------------- robustness

SURROGATE_AGENT = f"{sys.executable} {Path(__file__).resolve().parent / 'agents' / 'surrogate_agent.py'}"
STATE_ENV = "REMOTE_ACP_STATE_DIR"

# Answers initialize and session/new, then never reads its stdin again (its pipe shrunk to one
# page), so a prompt larger than that can never be written whole.
DEAF_AGENT = """
import contextlib, fcntl, json, sys, time
with contextlib.suppress(OSError):
    fcntl.fcntl(0, fcntl.F_SETPIPE_SZ, 4096)
for line in sys.stdin:
    msg = json.loads(line)
    result = {"initialize": {"protocolVersion": 1, "agentCapabilities": {}}, "session/new": {"sessionId": "deaf-1"}}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result[msg["method"]]}) + "\\n")
    sys.stdout.flush()
    if msg["method"] == "session/new":
        time.sleep(60)
"""

# Closes its stdin before it answers session/new and stays alive: writing the prompt fails.
CLOSED_STDIN_AGENT = """
import json, os, sys, time
for line in sys.stdin:
    msg = json.loads(line)
    result = {"initialize": {"protocolVersion": 1, "agentCapabilities": {}}, "session/new": {"sessionId": "shut-1"}}
    if msg["method"] == "session/new":
        os.close(0)
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result[msg["method"]]}) + "\\n")
    sys.stdout.flush()
    if msg["method"] == "session/new":
        time.sleep(60)
"""


def agent_file(tmp_path: Path, name: str, code: str) -> str:
    path = tmp_path / name
    path.write_text(code)
    return f"{sys.executable} {path}"


def state_dir() -> Path:
    return Path(os.environ[STATE_ENV])


def test_agent_text_that_cannot_be_encoded_never_breaks_the_output(workspace: str) -> None:
    # Human output replaces what stdout cannot carry; the run completes and is recorded.
    human = cli("--log-level", "info", "run", "--agent", SURROGATE_AGENT, "--workspace", workspace, "hi")
    assert human.returncode == 0, human.stderr
    assert human.stdout == "half an emoji: ?\n"
    assert "Traceback" not in human.stderr
    assert human.stderr.rstrip().endswith("session sess-\\ud83d: turn_completed")

    # --json stays one ASCII object per line, the lone surrogate escaped; JSON logs too.
    done = cli("--log-level", "info", "--log-format", "json", "run", "--json", "--agent", SURROGATE_AGENT,
               "--workspace", workspace, "hi")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.isascii()
    lines = json_lines(done.stdout)
    assert [line["delta"] for line in lines if line.get("delta")] == ["half an emoji: \ud83d"]
    assert lines[-2]["type"] == "turn_result" and lines[-2]["last_message"] == "half an emoji: \ud83d"
    assert lines[-1]["type"] == "run_result" and lines[-1]["session_id"] == "sess-\ud83d"
    assert lines[-1]["outcome"] == "turn_completed"
    logs = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert [r["agent_name"] for r in logs if r["message"] == "agent implementation"] == ["half \ud83d"]

    # The session history stores the agent's id escaped, and lists it again.
    assert (state_dir() / "sessions.jsonl").read_bytes().isascii()
    listed = cli("sessions", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [r["session_id"] for r in json_lines(listed.stdout)] == ["sess-\ud83d"]
    table = cli("sessions")
    assert table.returncode == 0, table.stderr
    assert "sess-?" in table.stdout


def test_agent_that_stops_reading_mid_prompt_ends_the_turn_port_exit(workspace: str, tmp_path: Path) -> None:
    agent = agent_file(tmp_path, "deaf_agent.py", DEAF_AGENT)
    started = time.monotonic()
    done = cli("run", "--json", "--agent", agent, "--workspace", workspace, "--read-timeout-ms", "500",
               "--stop-grace-ms", "1000", "x" * 100_000, "never sent")  # fmt: skip
    assert time.monotonic() - started < 15
    assert done.returncode == 5, done.stderr
    lines = json_lines(done.stdout)
    assert [line["type"] for line in lines] == [
        "session_started", "notification", "turn_failed", "turn_result", "run_result"
    ]  # fmt: skip
    message = "the agent stopped reading its input: a write waited read_timeout_ms (500 ms)"
    assert lines[3] == {
        "type": "turn_result",
        "session_id": "deaf-1",
        "outcome": "turn_failed",
        "error_kind": "port_exit",
        "cause": "agent_lost",
        "retryable": True,
        "message": message,
        "stop_reason": None,
        "last_message": "",
    }
    tokens = lines[4].pop("tokens")
    assert lines[4] == {
        "type": "run_result",
        "session_id": "deaf-1",
        "outcome": "turn_failed",
        "error_kind": "port_exit",
        "cause": "agent_lost",
        "retryable": True,
        "message": message,
        "obtained": "new",
        "load_held_s": None,
    }
    assert isinstance(tokens, dict) and (tokens["measured_turns"], tokens["unmeasured_turns"]) == (0, 1)
    recorded = json_lines((state_dir() / "sessions.jsonl").read_text())
    assert [(r["session_id"], r["outcome"], r["error_kind"]) for r in recorded] == [
        ("deaf-1", "turn_failed", "port_exit")
    ]


def test_turn_that_cannot_start_gets_a_turn_result_port_exit(workspace: str, tmp_path: Path) -> None:
    agent = agent_file(tmp_path, "closed_stdin_agent.py", CLOSED_STDIN_AGENT)
    done = cli("run", "--json", "--agent", agent, "--workspace", workspace, "--stop-grace-ms", "1000",
               "first", "never sent")  # fmt: skip
    assert done.returncode == 5, done.stderr
    lines = json_lines(done.stdout)
    assert [line["type"] for line in lines] == ["turn_not_started", "turn_result", "run_result"]
    assert lines[1]["outcome"] == "turn_not_started" and lines[1]["error_kind"] == "port_exit"
    assert lines[2]["outcome"] == "turn_not_started" and lines[2]["error_kind"] == "port_exit"
    assert lines[2]["session_id"] == "shut-1" and lines[2]["message"] == lines[1]["message"]
    assert "prompt" in str(lines[1]["message"])

    human = cli("run", "--agent", agent, "--workspace", workspace, "--stop-grace-ms", "1000", "first")
    assert human.returncode == 5
    assert "session shut-1: turn_not_started [port_exit: agent_lost]" in human.stderr.splitlines()[-1]


def test_output_that_cannot_be_written_is_a_clear_error(workspace: str) -> None:
    for args in (["run", "--agent", AGENT, "--workspace", workspace, "hi"],
                 ["run", "--json", "--agent", AGENT, "--workspace", workspace, "hi"],
                 ["sessions"], ["sessions", "--json"]):  # fmt: skip
        with open("/dev/full", "w") as full:
            done = subprocess.run(
                [*CLI, *args], stdout=full, stderr=subprocess.PIPE, text=True, timeout=30, check=False
            )
        assert done.returncode == 10, (args, done.stderr)
        assert "cannot write the output" in done.stderr and "No space left on device" in done.stderr
        assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr


def test_notices_that_cannot_be_written_do_not_fail_the_run(workspace: str) -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run([*CLI, "run", "--agent", AGENT, "--workspace", workspace, "hi"],
                              stdout=subprocess.PIPE, stderr=full, text=True, timeout=30, check=False)  # fmt: skip
    assert done.returncode == 0
    assert done.stdout == "hi\n"


def test_reader_going_away_ends_the_run_quietly(workspace: str) -> None:
    proc = subprocess.Popen(
        [*CLI, "run", "--json", "--agent", AGENT, "--workspace", workspace, "@bulk=200000", "second"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        assert json.loads(proc.stdout.readline())["type"] == "session_started"
        proc.stdout.close()
        err = proc.stderr.read().decode()
        proc.wait(timeout=30)
    finally:
        proc.kill()
        proc.wait()
        assert proc.stderr is not None
        proc.stderr.close()
    assert proc.returncode == 141, err
    assert "Traceback" not in err and "Exception ignored" not in err


def test_nul_byte_in_a_path_or_command_is_a_usage_error() -> None:
    # argv cannot carry a NUL byte, so this reaches the command only in-process.
    from click.testing import CliRunner

    from remote_acp.cli.main import cli as command

    runner = CliRunner()
    for args in (["run", "--agent", AGENT, "--workspace", "/tmp/a\x00b", "hi"],
                 ["run", "--agent", AGENT + "\x00", "hi"],
                 ["run", "--agent", AGENT, "--host", "h\x00", "--workspace", "/tmp", "hi"],
                 ["sessions", "--workspace", "/tmp/\x00"]):  # fmt: skip
        result = runner.invoke(command, args)
        assert result.exit_code == 2, (args, result.output)
        assert "must not contain a NUL byte" in result.output


def test_deleted_current_directory_is_a_usage_error(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    script = f'cd "{gone}" && rmdir "{gone}" && exec "$@"'
    for args in (["run", "--agent", AGENT, "hi"], ["run", "--agent", AGENT, "--workspace", "rel", "hi"],
                 ["sessions", "--workspace", "rel"]):  # fmt: skip
        done = subprocess.run(["sh", "-c", script, "sh", *CLI, *args], capture_output=True, text=True, timeout=30,
                              check=False)  # fmt: skip
        assert done.returncode == 2, (args, done.stderr)
        assert "the current directory is unusable" in done.stderr and "Traceback" not in done.stderr
        gone.mkdir()


def test_option_values_are_case_insensitive_and_ranges_checked(workspace: str) -> None:
    done = cli("--log-level", "INFO", "--log-format", "JSON", "run", "--agent", AGENT, "--workspace", workspace, "hi")
    assert done.returncode == 0, done.stderr
    assert any(json.loads(line)["level"] == "info" for line in done.stderr.splitlines() if line.startswith("{"))
    bad = cli("--log-level", "loud", "sessions")
    assert bad.returncode == 2 and "Invalid value for '--log-level'" in bad.stderr
    for limit in ("0", "-1"):
        listed = cli("sessions", "--limit", limit)
        assert listed.returncode == 2 and "--limit" in listed.stderr


def test_empty_workspace_is_refused_not_replaced_by_the_current_directory() -> None:
    done = cli("run", "--agent", AGENT, "--workspace", "", "hi")
    assert done.returncode == 3
    assert "invalid_workspace_cwd" in done.stderr


FOREIGN_FAILURE = """
import sys
import anyio
from remote_acp.cli.run import RunRequest, run_prompts
from remote_acp.options import SessionOptions

class BrokenTarget:
    label = "local"
    remote = False

    async def prepare(self, command, workspace):
        raise RuntimeError("boom")

    def start_slot(self):
        import contextlib
        return contextlib.nullcontext()

    def exit_error(self, status, *, agent_wrote, stderr, ready=None):
        return None

    def ready_error(self, bound_ms, *, stderr, printed):
        return None

request = RunRequest(options=SessionOptions(command="x"), workspace=sys.argv[1], prompts=["hi"],
                     as_json=sys.argv[2] == "json", target=BrokenTarget())
sys.exit(anyio.run(run_prompts, request))
"""


def test_a_foreign_exception_from_the_library_is_one_line_not_a_traceback(workspace: str) -> None:
    done = subprocess.run([sys.executable, "-c", FOREIGN_FAILURE, workspace, "json"], capture_output=True, text=True,
                          timeout=30, check=False)  # fmt: skip
    assert done.returncode == 1
    final = json_lines(done.stdout)[-1]
    assert final["outcome"] == "internal_error" and final["error_kind"] is None
    assert "RuntimeError: boom" in str(final["message"])
    assert "internal error: RuntimeError: boom" in done.stderr and "Traceback" not in done.stderr
    human = subprocess.run([sys.executable, "-c", FOREIGN_FAILURE, workspace, "text"], capture_output=True, text=True,
                           timeout=30, check=False)  # fmt: skip
    assert human.returncode == 1
    assert human.stderr.strip() == "remote-acp: session -: internal_error (internal error: RuntimeError: boom)"


def test_text_logs_show_extra_fields() -> None:
    import logging

    from remote_acp.cli.logging_setup import TextFormatter

    record = logging.LogRecord("remote_acp.session.core", logging.WARNING, __file__, 1, "agent stderr", None, None)
    record.line = "boom"
    record.pid = 42
    assert TextFormatter().format(record) == "warning: agent stderr (line=boom pid=42)"
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        failed = logging.LogRecord("remote_acp.cli", logging.DEBUG, __file__, 1, "internal error", None, sys.exc_info())
    text = TextFormatter().format(failed)
    assert text.startswith("debug: internal error\nTraceback") and text.endswith("RuntimeError: boom")


def test_failed_start_logs_the_agent_stderr_lines(workspace: str) -> None:
    done = cli("run", "--agent", f"{AGENT} --crash-at initialize --stderr fatal-oops", "--workspace", workspace, "hi")
    assert done.returncode == 3
    logged = [line for line in done.stderr.splitlines() if line.startswith("warning: agent stderr")]
    assert logged and all("fatal-oops" in line for line in logged[-1:])
