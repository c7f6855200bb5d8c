"""``run --resume`` continues the session it names where it ran: ``last`` means the same agent's
latest session on this target and workspace, and an id the history does not hold is said aloud,
with the recorded sessions it may have meant, before anything runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

CLI = [sys.executable, "-m", "remote_acp.cli.main"]
AGENT = f"{sys.executable} -m remote_acp.testing.scripted_agent"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60, check=False)


def final(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def age_history(minutes: int) -> None:
    """Move the recorded creation times back: a load need not wait out the creation minute."""
    path = Path(os.environ["REMOTE_ACP_STATE_DIR"]) / "sessions.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for record in records:
        if record.get("created"):
            then = datetime.fromisoformat(str(record["created"])) - timedelta(minutes=minutes)
            record["created"] = then.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_resume_last_takes_the_same_agents_session_not_the_latest_of_any(tmp_path: Path) -> None:
    workspace = str(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    mine = f"{AGENT} --state-dir {state} --advertise load --session-id mine-1"
    other = f"{AGENT} --name other --state-dir {state} --advertise load --session-id other-1"
    final(cli("run", "--json", "--agent", mine, "--workspace", workspace, "hello"))
    final(cli("run", "--json", "--agent", other, "--workspace", workspace, "hello"))  # the latest of all
    age_history(minutes=2)
    again = final(cli("run", "--json", "--agent", mine, "--workspace", workspace, "--resume", "last", "go on"))
    assert (again["session_id"], again["obtained"]) == ("mine-1", "loaded")


def test_resume_last_without_a_session_of_that_agent_is_a_usage_error(tmp_path: Path) -> None:
    workspace = str(tmp_path)
    final(cli("run", "--json", "--agent", f"{AGENT} --name other", "--workspace", workspace, "hello"))
    done = cli("run", "--agent", AGENT, "--workspace", workspace, "--resume", "last", "go on")
    assert done.returncode == 2
    assert f"no saved session of {AGENT!r} for {workspace} on local to resume" in done.stderr


def test_an_id_the_history_does_not_hold_is_said_first_with_the_close_ones(tmp_path: Path) -> None:
    workspace = str(tmp_path)
    final(cli("run", "--json", "--agent", f"{AGENT} --session-id sess-4711", "--workspace", workspace, "hi"))
    done = cli("run", "--json", "--agent", AGENT, "--workspace", workspace, "--resume", "sess-4712", "hi")
    said = done.stderr.splitlines()[0]
    assert said.startswith("remote-acp: session sess-4712 is not in the session history: it is offered")
    assert f"Recorded sessions: sess-4711 (local:{workspace}, " in said
    assert final(done)["obtained"] == "fell back"  # the agent cannot continue it: a fresh session


def test_resume_continues_in_the_recorded_workspace_when_none_is_given(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    state = tmp_path / "state"
    state.mkdir()
    agent = f"{AGENT} --state-dir {state} --advertise load --session-id here-1"
    final(cli("run", "--json", "--agent", agent, "--workspace", str(workspace), "hello"))
    age_history(minutes=2)
    # Run from elsewhere (the test's cwd), naming no workspace: the session's own is used.
    again = final(cli("run", "--json", "--agent", agent, "--resume", "here-1", "go on"))
    assert (again["session_id"], again["obtained"]) == ("here-1", "loaded")
    listed = [json.loads(line) for line in cli("sessions", "--json").stdout.splitlines()]
    assert listed[0]["workspace"] == str(workspace)
