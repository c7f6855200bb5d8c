"""``remote-acp sessions`` and ``run --resume``, run as real processes, and the session history
behind them: recorded, listed, resumed, and never a reason for a run to fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.cli import AGENT, CLI, cli, json_lines

pytestmark = pytest.mark.process  # the command runs as a process of its own

SURROGATE_AGENT = f"{sys.executable} {Path(__file__).resolve().parent / 'agents' / 'surrogate_agent.py'}"
STATE_ENV = "REMOTE_ACP_STATE_DIR"


def state_dir() -> Path:
    return Path(os.environ[STATE_ENV])


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
    assert str(records[0]["created"]).endswith("Z")
    age_history(minutes=2)  # created in an earlier minute: the loads below need not wait one out

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


def age_history(minutes: int) -> None:
    """Move every recorded creation time ``minutes`` back, as if the sessions were made then."""
    from datetime import datetime, timedelta

    path = Path(os.environ["REMOTE_ACP_STATE_DIR"]) / "sessions.jsonl"
    records = json_lines(path.read_text())
    for record in records:
        if record.get("created"):
            then = datetime.fromisoformat(str(record["created"])) - timedelta(minutes=minutes)
            record["created"] = then.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_resume_last_without_a_saved_session_is_a_usage_error(workspace: str) -> None:
    done = cli("run", "--agent", AGENT, "--workspace", workspace, "--resume", "last", "hi")
    assert done.returncode == 2
    assert "no saved session" in done.stderr


def test_sessions_table_prints_ids_and_paths_as_text_not_markup(workspace: str) -> None:
    done = cli("run", "--agent", f"{SURROGATE_AGENT} --session-id [/oops]", "--workspace", workspace, "hi")
    assert done.returncode == 0, done.stderr
    table = cli("sessions")
    assert table.returncode == 0, table.stderr
    assert "[/oops]" in table.stdout


def test_sessions_piped_keeps_every_id_whole_and_escaped(workspace: str) -> None:
    long_id = "sess-" + "0123456789abcdef" * 6 + "\x1b]0;t\x07"
    done = cli("run", "--agent", f"{AGENT} --session-id {long_id!r}", "--workspace", workspace, "hi")
    assert done.returncode == 0, done.stderr
    table = cli("sessions")  # stdout is a pipe here
    assert table.returncode == 0, table.stderr
    shown = long_id.replace("\x1b", "\\x1b").replace("\x07", "\\x07")
    assert table.stdout.splitlines()[0].startswith(f"{shown}  ")
    assert "\x1b" not in table.stdout


def test_session_history_with_undecodable_and_foreign_lines(workspace: str) -> None:
    state_dir().mkdir(parents=True)
    good = {
        "session_id": "old-1",
        "agent": AGENT,  # resume last takes this agent's sessions only
        "target": "local",
        "workspace": workspace,
        "when": "2020-01-01T00:00:00Z",
        "outcome": "turn_completed",
        "error_kind": None,
        "obtained": "new",
    }
    (state_dir() / "sessions.jsonl").write_bytes(
        b"garbage \xff\xfe\n"
        + json.dumps(good).encode()
        + b"\n"
        + b'{"session_id": 5, "agent": "a"}\n["not", "a", "record"]\n'
        + b"[" * 100_000
        + b"\n"
        + json.dumps({**good, "session_id": "caf\xe9"}, ensure_ascii=False).encode("latin-1")
        + b"\n"
    )
    listed = cli("sessions", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [r["session_id"] for r in json_lines(listed.stdout)] == ["caf\ufffd", "old-1"]
    table = cli("sessions")
    assert table.returncode == 0 and "old-1" in table.stdout

    done = cli("run", "--agent", AGENT, "--workspace", workspace, "--resume", "last", "go on")
    assert done.returncode == 0, done.stderr
    assert "could not record" not in done.stderr
    listed = cli("sessions", "--json")
    assert json_lines(listed.stdout)[0]["session_id"] == "sess-1"


def test_unusable_history_is_a_clear_error_and_never_fails_a_run(workspace: str) -> None:
    (state_dir() / "sessions.jsonl").mkdir(parents=True)  # a directory where the file should be
    listed = cli("sessions")
    assert listed.returncode == 10
    assert "cannot read the session history" in listed.stderr and "Is a directory" in listed.stderr
    assert "Traceback" not in listed.stderr

    done = cli("run", "--json", "--agent", AGENT, "--workspace", workspace, "hi")
    assert done.returncode == 0, done.stderr
    assert json_lines(done.stdout)[-1]["outcome"] == "turn_completed"
    assert "warning: could not record the session" in done.stderr and "Traceback" not in done.stderr

    resumed = cli("run", "--agent", AGENT, "--workspace", workspace, "--resume", "last", "hi")
    assert resumed.returncode == 10
    assert "cannot read the session history" in resumed.stderr and "Traceback" not in resumed.stderr


def _without_dac_override() -> list[str]:
    """A command prefix under which file permissions bind (root bypasses them otherwise)."""
    if os.geteuid() != 0:
        return []
    drop = ["setpriv", "--inh-caps=-dac_override,-dac_read_search", "--bounding-set=-dac_override,-dac_read_search"]
    try:
        probe = subprocess.run([*drop, "true"], capture_output=True, check=False, timeout=10)
    except OSError:
        pytest.skip("running as root without setpriv: permissions cannot be made to bind")
    if probe.returncode != 0:
        pytest.skip(f"cannot drop CAP_DAC_OVERRIDE here: {probe.stderr!r}")
    return drop


def test_history_permission_denied(workspace: str) -> None:
    prefix = _without_dac_override()
    state = state_dir()
    state.mkdir(parents=True)
    (state / "sessions.jsonl").write_text("")
    state.chmod(0)
    try:
        listed = subprocess.run([*prefix, *CLI, "sessions"], capture_output=True, text=True, timeout=30, check=False)
        done = subprocess.run([*prefix, *CLI, "run", "--agent", AGENT, "--workspace", workspace, "hi"],
                              capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
    finally:
        state.chmod(0o700)
    assert listed.returncode == 10, listed.stderr
    assert "cannot read the session history" in listed.stderr and "Permission denied" in listed.stderr
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hi\n"
    assert "could not record the session" in done.stderr and "Permission denied" in done.stderr


COMPACTING_WRITER = """
import sys
from pathlib import Path
from remote_acp.cli.history import SessionHistory, SessionRecord
history = SessionHistory(Path(sys.argv[1]), keep=int(sys.argv[2]))
writer = sys.argv[3]
for i in range(int(sys.argv[4])):
    history.add(SessionRecord(session_id=f"{writer}-{i}", agent="a", target="local", workspace="/w", when="t",
                              outcome="turn_completed"))
"""


def test_compaction_loses_no_line_appended_by_a_concurrent_run(tmp_path: Path) -> None:
    writers, each, keep = 8, 60, 10
    state = tmp_path / "history"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", COMPACTING_WRITER, str(state), str(keep), str(w), str(each)],
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for w in range(writers)
    ]
    errors = [p.communicate(timeout=60)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * writers, errors
    # Appends and compactions are serialized, so the line count is that of a sequential history:
    # every compaction happens at 2 * keep lines and leaves keep.
    total = writers * each
    expected = total if total < 2 * keep else keep + (total - 2 * keep) % keep
    ids = [str(r["session_id"]) for r in json_lines((state / "sessions.jsonl").read_text())]
    assert len(ids) == expected
    for w in range(writers):  # what survives of each writer is its latest records, none skipped
        mine = [int(i.split("-")[1]) for i in ids if i.startswith(f"{w}-")]
        assert mine == list(range(each - len(mine), each))
    assert (state / "sessions.jsonl").stat().st_mode & 0o777 == 0o600


@pytest.mark.timing
def test_history_lock_wait_is_bounded(tmp_path: Path) -> None:
    import fcntl

    from remote_acp.cli.history import HistoryError, SessionHistory, SessionRecord

    history = SessionHistory(tmp_path, lock_wait_s=0.2)
    record = SessionRecord("s", "a", "local", "/w", "t", "turn_completed")
    with open(history.lock_path, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        started = time.monotonic()
        with pytest.raises(HistoryError, match="held the lock"):
            history.add(record)
        assert time.monotonic() - started < 2
    history.add(record)
    assert history.records() == [record]
