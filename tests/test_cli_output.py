"""``remote-acp run`` against output nobody reads, closed streams and impatient signals.

Every test drives the real command with real pipes: a pipe "nobody reads" is one whose read end
the test holds open and never reads, so the command's writes block exactly as they would behind
a stalled consumer. Waits are on something observable (the pipe full, a line the agent recorded),
never on a sleep.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import termios
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pytest

from tests.support.orphans import alive

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

AGENT = f"{sys.executable} -m remote_acp.testing.scripted_agent"
CLI = [sys.executable, "-m", "remote_acp.cli.main"]

# Answers the handshake, then answers a prompt with a flood that never ends: text chunks
# (stdout, in --json as one line each) or plan updates (a notice each, on stderr in human mode).
# It ignores session/cancel and SIGTERM, so only the client's own bounds and SIGKILL end it, and
# records every line it receives.
FLOOD_AGENT = """
import json, os, signal, sys, threading
signal.signal(signal.SIGTERM, signal.SIG_IGN)
kind, record = sys.argv[1], sys.argv[2]
out = os.fdopen(1, "wb", buffering=1 << 16)
lock = threading.Lock()

def send(obj):
    with lock:
        out.write(json.dumps(obj).encode() + b"\\n")
        out.flush()

def flood(sid):
    if kind == "text":
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x"}}
    else:
        update = {"sessionUpdate": "plan", "entries": [{"content": "a step", "priority": "high", "status": "pending"}]}
    line = json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": update}})
    batch = (line.encode() + b"\\n") * 256
    while True:
        with lock:
            out.write(batch)

with open(record, "ab", buffering=0) as rec:
    for raw in sys.stdin.buffer:
        rec.write(raw)
        msg = json.loads(raw)
        method = msg.get("method")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {"protocolVersion": 1, "agentCapabilities": {}}})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {"sessionId": "flood-1"}})
        elif method == "session/prompt":
            threading.Thread(target=flood, args=("flood-1",), daemon=True).start()
"""

# What the old behaviour took at the least against FLOOD_AGENT (the cancel's answer waited for,
# then the graceful window): the tests give these bounds and expect the run to end far sooner.
SLOW_MS = "30000"


def json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()]


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@contextmanager
def unread_pipe() -> Iterator[tuple[int, int]]:
    """A pipe whose read end stays open and unread: (read end, write end)."""
    r, w = os.pipe()
    try:
        yield r, w
    finally:
        for fd in (r, w):
            try:
                os.close(fd)
            except OSError:
                pass


def pipe_full(r: int) -> Callable[[], bool]:
    """Whether the pipe is filling up: past half its size, while the flood goes on, the writer
    is about to block. (A full pipe can hold less than its size: a write that does not fit in
    the last page starts a new one.)"""
    size = fcntl.fcntl(r, fcntl.F_GETPIPE_SZ) // 2

    def full() -> bool:
        buf = bytearray(4)
        fcntl.ioctl(r, termios.FIONREAD, buf)
        return int.from_bytes(buf, sys.byteorder) >= size

    return full


def received(record: Path, method: str) -> Callable[[], bool]:
    def seen() -> bool:
        return record.exists() and any(
            json.loads(line).get("method") == method for line in record.read_text().splitlines()
        )

    return seen


def flood_agent(tmp_path: Path, kind: str) -> tuple[str, Path]:
    path = tmp_path / "flood_agent.py"
    path.write_text(FLOOD_AGENT)
    record = tmp_path / "received.jsonl"
    return f"{sys.executable} {path} {kind} {record}", record


def start_unread(
    tmp_path: Path, workspace: str, w: int, stream: str, *bounds: str
) -> tuple[subprocess.Popen[bytes], Path]:
    """The command with ``stream`` (stdout: --json and a text flood; stderr: human output and a
    flood of notices) on the unread pipe's write end, the other stream discarded."""
    agent, record = flood_agent(tmp_path, "text" if stream == "stdout" else "plan")
    mode = ["--json"] if stream == "stdout" else []
    outputs = (
        {"stdout": w, "stderr": subprocess.DEVNULL}
        if stream == "stdout"
        else {"stdout": subprocess.DEVNULL, "stderr": w}
    )
    proc = subprocess.Popen(
        [*CLI, "run", *mode, "--agent", agent, "--workspace", workspace, *bounds, "go"],
        **outputs,  # type: ignore[call-overload]
    )
    os.close(w)
    return proc, record


def finish(proc: subprocess.Popen[bytes], timeout: float = 60) -> int:
    try:
        return proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_turn_bound_holds_while_the_output_is_unread(workspace: str, tmp_path: Path, stream: str) -> None:
    with unread_pipe() as (r, w):
        started = time.monotonic()
        proc, _ = start_unread(tmp_path, workspace, w, stream, "--turn-timeout-ms", "2000",
                               "--read-timeout-ms", "1000", "--stop-grace-ms", "1000")  # fmt: skip
        wait_for(pipe_full(r), f"the command's {stream} to fill")
        code = finish(proc)
        elapsed = time.monotonic() - started
    assert code == 6  # turn_timeout
    assert elapsed < 15, elapsed  # the bound (2 s), the cancel's answer (1 s), the grace (1 s), start-up


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_sigterm_is_honoured_while_the_output_is_unread(workspace: str, tmp_path: Path, stream: str) -> None:
    with unread_pipe() as (r, w):
        proc, _ = start_unread(tmp_path, workspace, w, stream, "--read-timeout-ms", "1000", "--stop-grace-ms", "1000")
        wait_for(pipe_full(r), f"the command's {stream} to fill")
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = finish(proc)
        elapsed = time.monotonic() - signalled
    assert code == 130
    assert elapsed < 15, elapsed  # the cancel's answer (1 s) and the grace (1 s)


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_second_sigint_stops_at_once_while_the_output_is_unread(workspace: str, tmp_path: Path, stream: str) -> None:
    with unread_pipe() as (r, w):
        proc, record = start_unread(tmp_path, workspace, w, stream, "--read-timeout-ms", SLOW_MS,
                                    "--stop-grace-ms", SLOW_MS)  # fmt: skip
        wait_for(pipe_full(r), f"the command's {stream} to fill")
        proc.send_signal(signal.SIGINT)
        wait_for(received(record, "session/cancel"), "the first SIGINT's session/cancel")
        signalled = time.monotonic()
        proc.send_signal(signal.SIGINT)
        code = finish(proc)
        elapsed = time.monotonic() - signalled
    assert code == 130
    assert elapsed < 15, elapsed  # not the 30 s answer wait, nor the 30 s graceful window


def test_second_sigint_stops_at_once_and_still_ends_the_turn_line(workspace: str, tmp_path: Path) -> None:
    record, pid_file = tmp_path / "received.jsonl", tmp_path / "agent.pid"
    agent = f"{AGENT} --ignore-sigterm --record {record} --pid-file {pid_file}"
    proc = subprocess.Popen(
        [*CLI, "run", "--json", "--agent", agent, "--workspace", workspace, "--read-timeout-ms", SLOW_MS,
         "--stop-grace-ms", SLOW_MS, "@sleep=60 @ignore-cancel"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline())["type"] == "session_started"  # the turn is on
        proc.send_signal(signal.SIGINT)
        wait_for(received(record, "session/cancel"), "the first SIGINT's session/cancel")
        signalled = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        elapsed = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    assert proc.returncode == 130, err
    assert elapsed < 15, elapsed
    lines = json_lines(out)
    assert lines[-2]["type"] == "turn_result" and lines[-2]["error_kind"] == "turn_cancelled"
    assert lines[-1]["type"] == "run_result" and lines[-1]["message"] == "interrupted"
    assert not alive(int(pid_file.read_text()))


def test_closing_lines_reach_a_reader_that_comes_back(workspace: str, tmp_path: Path) -> None:
    # The reader stops reading mid-turn and comes back only once the agent is gone: the turn's
    # bound still fired, what could not wait is dropped (and said so), and the turn's result
    # and the run's result are written at the end.
    agent, _ = flood_agent(tmp_path, "text")
    pid_file = tmp_path / "agent.pid"
    agent = f"sh -c 'echo $$ > {pid_file}; exec \"$@\"' sh {agent}"
    r, w = os.pipe()
    proc = subprocess.Popen(
        [*CLI, "run", "--json", "--agent", agent, "--workspace", workspace, "--turn-timeout-ms", "2000",
         "--read-timeout-ms", "1000", "--stop-grace-ms", "1000", "go"],
        stdout=w, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    os.close(w)
    try:
        wait_for(pipe_full(r), "stdout to fill")
        wait_for(pid_file.exists, "the agent's pid")
        agent_pid = int(pid_file.read_text())
        wait_for(lambda: not alive(agent_pid), "the agent to be stopped")
        with os.fdopen(r, "rb") as reader:
            tail = reader.read().splitlines()[-2:]
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    assert proc.returncode == 6, err
    results = [json.loads(line) for line in tail]
    assert results[0]["type"] == "turn_result" and results[0]["error_kind"] == "turn_timeout"
    assert results[1]["type"] == "run_result" and results[1]["error_kind"] == "turn_timeout"
    assert "pieces of output were dropped: nobody read them" in err


@pytest.mark.parametrize("mode", [[], ["--json"]])
def test_closed_stdout_exits_10_and_nothing_reaches_the_agent(workspace: str, tmp_path: Path, mode: list[str]) -> None:
    record = tmp_path / "received.jsonl"
    done = subprocess.run(
        ["sh", "-c", 'exec "$@" >&-', "sh", *CLI, "run", *mode, "--agent", f"{AGENT} --record {record}",
         "--workspace", workspace, "hi"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 10, done.stderr
    assert "cannot write the output" in done.stderr and "Bad file descriptor" in done.stderr
    assert "Traceback" not in done.stderr
    received_lines = record.read_text().splitlines()
    assert received_lines and all(json.loads(line)["jsonrpc"] == "2.0" for line in received_lines)


def test_closed_stderr_and_stdin_do_not_fail_the_run(workspace: str, tmp_path: Path) -> None:
    record = tmp_path / "received.jsonl"
    done = subprocess.run(
        ["sh", "-c", 'exec "$@" <&- 2>&-', "sh", *CLI, "run", "--agent", f"{AGENT} --record {record}",
         "--workspace", workspace, "@thought hi"],
        stdout=subprocess.PIPE, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 0
    assert done.stdout == "hi\n"
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in record.read_text().splitlines())
