"""``remote-acp run --reattach-window`` with ``--detach``, ``remote-acp attach`` and
``remote-acp sessions``, as an operator uses them, against the lab's sshd: the handle is kept in
the private session history and never shown, a detached session is listed with the time it has
left, taken over by name, and said to be expired once its host ended it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from typing import TYPE_CHECKING

import pytest

from tests.support.cli import AGENT, CLI, json_lines
from tests.support.processes import marked, wait_for

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from integration.sshlab import SshLab


DRIP = "@drip=30 @drip-ms=100 go"
EVERY_CHUNK = [f"chunk-{i:04d} " for i in range(1, 31)]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "REMOTE_ACP_STATE_DIR": str(tmp_path / "state"), "REMOTE_ACP_CACHE_DIR": str(tmp_path / "c")}


def remote_acp(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, timeout=timeout, check=False)


def ssh_args(lab: SshLab, host: str = "lab1") -> list[str]:
    return ["--host", host, "--ssh-config", str(lab.config), "--workspace", "/tmp"]


def history(env: dict[str, str]) -> list[dict[str, object]]:
    path = os.path.join(env["REMOTE_ACP_STATE_DIR"], "sessions.jsonl")
    try:
        with open(path, encoding="ascii") as f:
            return [json.loads(line) for line in f]
    except FileNotFoundError:
        return []


def in_flight(env: dict[str, str]) -> Callable[[], bool]:
    def recorded() -> bool:
        return any(isinstance(h := r.get("handle"), dict) and h.get("prompt_id") for r in history(env))

    return recorded


def test_a_detached_session_is_listed_taken_over_by_name_and_then_ends(ssh_lab: SshLab, env: dict[str, str]) -> None:
    done = remote_acp(env, "run", "--agent", AGENT, *ssh_args(ssh_lab), "--reattach-window", "60", "--detach", "one")
    assert done.returncode == 0, done.stderr
    relay_id = str(history(env)[-1]["handle"]["relay_id"])  # type: ignore[index]
    secret = str(history(env)[-1]["handle"]["secret"])  # type: ignore[index]
    assert f"remote-acp attach {relay_id}" in done.stderr  # the closing note
    listed = remote_acp(env, "sessions")
    assert "detached, " in listed.stdout and f"remote-acp attach {relay_id}" in listed.stdout, listed.stdout
    as_json = remote_acp(env, "sessions", "--json")
    assert secret not in as_json.stdout and secret not in listed.stdout  # the secret stays in the history
    (record,) = json_lines(as_json.stdout)
    assert record["reattach"]["state"] == "detached" and 50 < record["reattach"]["seconds_left"] <= 60  # type: ignore[index]

    taken = remote_acp(env, "attach", relay_id, "--json", "two")
    assert taken.returncode == 0, taken.stderr
    results = [line for line in json_lines(taken.stdout) if line["type"] == "turn_result"]
    assert [r["outcome"] for r in results] == ["turn_completed"]
    final = json_lines(taken.stdout)[-1]
    assert final["type"] == "run_result" and final["outcome"] == "turn_completed" and final["error_kind"] is None
    assert "reattach" not in json_lines(remote_acp(env, "sessions", "--json").stdout)[0]  # ended with the run
    again = remote_acp(env, "attach", relay_id)
    assert again.returncode == 2 and "has no reattach handle" in again.stderr
    wait_for(lambda: not marked(f"_RA_SESSION={relay_id}."), "the session's processes to end", within=10)


def test_a_name_the_history_does_not_hold_is_a_usage_error(env: dict[str, str]) -> None:
    done = remote_acp(env, "attach", "nosuchsession")
    assert done.returncode == 2
    assert "session nosuchsession is not in the session history" in done.stderr


def test_detach_needs_a_window_on_a_host(ssh_lab: SshLab, env: dict[str, str]) -> None:
    local = remote_acp(env, "run", "--agent", AGENT, "--detach", "x")
    assert local.returncode == 2 and "a local session ends with its run" in local.stderr
    no_window = remote_acp(env, "run", "--agent", AGENT, *ssh_args(ssh_lab), "--detach", "x")
    assert no_window.returncode == 2 and "--detach needs a session with a reattach window" in no_window.stderr


def test_a_run_killed_mid_turn_is_taken_over_with_the_rest_of_its_turn(ssh_lab: SshLab, env: dict[str, str]) -> None:
    run = subprocess.Popen(
        [*CLI, "run", "--agent", AGENT, *ssh_args(ssh_lab), "--reattach-window", "60", "--json", DRIP],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        wait_for(in_flight(env), "the run to record its prompt in flight", within=30)
        time.sleep(0.5)  # some chunks reach this run before it dies
    finally:
        run.send_signal(signal.SIGKILL)
        seen_before = run.communicate(timeout=10)[0]
    before = [e["delta"] for e in json_lines(seen_before) if e.get("type") == "notification" and e.get("delta")]
    record = next(r for r in reversed(history(env)) if isinstance(r.get("handle"), dict))
    listed = json_lines(remote_acp(env, "sessions", "--json").stdout)[0]["reattach"]
    assert isinstance(listed, dict) and (listed["state"], listed["run_pid"]) == ("run_gone", run.pid), listed
    assert f"its run (pid {run.pid}) is gone without detaching" in remote_acp(env, "sessions").stdout
    taken = remote_acp(env, "attach", str(record["session_id"]), "--json", "after")
    assert taken.returncode == 0, taken.stderr
    lines = json_lines(taken.stdout)
    after = [e["delta"] for e in lines if e.get("type") == "notification" and e.get("delta")]
    taken_chunks = [c for c in after if str(c).startswith("chunk-")]
    # Every chunk arrives, none twice in the run that took over; a chunk the killed run had may
    # come again, from the last whole line it acknowledged.
    assert len(taken_chunks) == len(set(taken_chunks))
    assert sorted({str(c) for c in before + after if str(c).startswith("chunk-")}) == EVERY_CHUNK
    assert [r["outcome"] for r in lines if r["type"] == "turn_result"] == ["turn_completed", "turn_completed"]


def test_an_expired_session_is_listed_as_such_and_refused(ssh_lab: SshLab, env: dict[str, str]) -> None:
    done = remote_acp(env, "run", "--agent", AGENT, *ssh_args(ssh_lab), "--reattach-window", "2", "--detach", "one")
    assert done.returncode == 0, done.stderr
    relay_id = str(history(env)[-1]["handle"]["relay_id"])  # type: ignore[index]
    time.sleep(4.5)
    assert "expired" in remote_acp(env, "sessions").stdout
    taken = remote_acp(env, "attach", relay_id, "--json")
    assert taken.returncode == 3, taken.stdout + taken.stderr
    final = json_lines(taken.stdout)[-1]
    assert final["cause"] == "session_expired" and final["error_kind"] == "port_exit"
    assert "the detached session is gone" in str(final["message"])
