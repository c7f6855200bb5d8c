"""Load spacing that survives the process: the creation time kept with each history record, handed
to the ledger by whoever continues the session, and the hold it causes (library and command)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from remote_acp import open_session
from remote_acp.cli.history import SessionHistory, SessionRecord
from remote_acp.session.continuation import OriginLedger
from tests.support.agents import fast_options, scripted
from tests.support.cli import AGENT, CLI, cli, json_lines
from tests.support.processes import read_line


class FakeClock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def history() -> SessionHistory:
    return SessionHistory(Path(os.environ["REMOTE_ACP_STATE_DIR"]))


def rewrite_created(session_id: str, created: datetime) -> None:
    """Give the session's records another creation time (as if it had been created then)."""
    path = history().path
    records = json_lines(path.read_text())
    for record in records:
        if record["session_id"] == session_id:
            record["created"] = created.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


# -- the ledger ---------------------------------------------------------------------------------


def test_a_creation_time_from_elsewhere_holds_a_load_like_one_made_here() -> None:
    clock = FakeClock(datetime(2026, 11, 30, 12, 0, 40, tzinfo=UTC))
    ledger = OriginLedger(clock)
    ledger.record("/w", "theirs", at=datetime(2026, 11, 30, 12, 0, 5, tzinfo=UTC))
    assert ledger.hold_for("/w", "theirs") == 20.0
    assert ledger.created("/w", "theirs") == datetime(2026, 11, 30, 12, 0, 5, tzinfo=UTC)
    # Any time zone is read as the instant it names.
    ledger.record("/w", "zoned", at=datetime(2026, 11, 30, 13, 0, 30, tzinfo=timezone(timedelta(hours=1))))
    assert ledger.hold_for("/w", "zoned") == 20.0
    # The later of two known times wins: an earlier one never ends a hold early.
    ledger.record("/w", "mine")
    ledger.record("/w", "mine", at=datetime(2026, 11, 30, 11, 59, 59, tzinfo=UTC))
    assert ledger.hold_for("/w", "mine") == 20.0
    # A time too old to hold anything is not kept; one without a time zone is refused.
    ledger.record("/w", "old", at=datetime(2026, 11, 30, 11, 50, tzinfo=UTC))
    assert ledger.created("/w", "old") is None and ledger.hold_for("/w", "old") == 0.0
    with pytest.raises(ValueError, match="time zone"):
        ledger.record("/w", "naive", at=datetime(2026, 11, 30, 12, 0, 5))


@pytest.mark.anyio
async def test_a_session_created_by_another_process_is_loaded_after_its_minute(workspace: str, tmp_path: Path) -> None:
    state = tmp_path / "agent-state"
    state.mkdir()
    agent = fast_options(scripted("--state-dir", str(state), "--advertise", "load"))
    async with open_session(workspace, agent, ledger=OriginLedger()) as s:  # "another process"
        created = s.session_id
        assert (await s.run_turn("remember me")).ok
    # This process never saw the session created; it is told when, and the clock says 0.3 s of
    # that minute remain.
    clock = FakeClock(datetime(2026, 11, 30, 12, 0, 59, 700_000, tzinfo=UTC))
    holds: list[tuple[str, float]] = []
    ledger = OriginLedger(clock, on_hold=lambda sid, s: holds.append((sid, s)))
    ledger.record(workspace, created, at=datetime(2026, 11, 30, 12, 0, 3, tzinfo=UTC))
    async with open_session(workspace, agent, resume=created, ledger=ledger) as s:
        assert s.info is not None and s.info.obtained == "loaded"
    [(held_id, held_s)] = holds
    assert held_id == created and held_s == pytest.approx(0.3)


# -- the command --------------------------------------------------------------------------------


def test_the_history_keeps_the_creation_time_and_a_continuation_carries_it_on(workspace: str, tmp_path: Path) -> None:
    state = tmp_path / "agent-state"
    state.mkdir()
    agent = f"{AGENT} --state-dir {state} --advertise load"
    before = datetime.now(UTC)
    first = cli("run", "--json", "--agent", agent, "--workspace", workspace, "remember this")
    after = datetime.now(UTC)
    assert first.returncode == 0, first.stderr
    saved = str(json_lines(first.stdout)[-1]["session_id"])
    [record] = history().records()
    created = record.created_at()
    assert created is not None and before <= created <= after

    # Created two minutes ago: a load from this new process has nothing to wait out.
    earlier = created - timedelta(minutes=2)
    rewrite_created(saved, earlier)
    resumed = cli("run", "--json", "--agent", agent, "--workspace", workspace, "--resume", saved, "go on")
    assert resumed.returncode == 0, resumed.stderr
    final = json_lines(resumed.stdout)[-1]
    assert (final["obtained"], final["load_held_s"]) == ("loaded", None)
    # The continuing run's record keeps the session's own creation time, not its own start.
    assert [(r.obtained, r.created_at()) for r in history().records()] == [("new", earlier), ("loaded", earlier)]
    listed = json_lines(cli("sessions", "--json", "--workspace", workspace).stdout)
    assert listed[0]["created"] == earlier.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_a_resume_in_the_creation_minute_says_it_waits_and_ctrl_c_ends_the_wait(workspace: str, tmp_path: Path) -> None:
    state, rec = tmp_path / "agent-state", tmp_path / "rec.jsonl"
    state.mkdir()
    agent = f"{AGENT} --state-dir {state} --advertise load"
    first = cli("run", "--json", "--agent", agent, "--workspace", workspace, "remember this")
    assert first.returncode == 0, first.stderr
    saved = str(json_lines(first.stdout)[-1]["session_id"])
    # Created half a minute ahead of this clock (a host whose clock runs ahead): the hold lasts
    # 30 to 60 s whatever second of the minute this runs in, far longer than the run takes to say
    # so and be interrupted, and never ends before. (A creation time of now would leave as little
    # as nothing to wait out in the minute's last seconds.)
    rewrite_created(saved, datetime.now(UTC) + timedelta(seconds=30))

    proc = subprocess.Popen(
        [*CLI, "run", "--agent", f"{agent} --record {rec}", "--workspace", workspace, "--resume", saved, "go on"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    try:
        note = read_line(proc.stderr, within=30, what="the run's first words").decode()
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    assert note.startswith("remote-acp: waiting ") and f"before loading session {saved}:" in note, note
    assert "created in this UTC minute" in note
    seconds = float(note.split()[2])
    assert 0 < seconds <= 60, note
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted" in err.splitlines()[-1]
    # The hold came before the load: the agent was never asked to load the session.
    assert "session/load" not in [json.loads(line).get("method") for line in rec.read_text().splitlines()]


COMMAND_RUN = [*CLI, "run", "--json", "--workspace"]


def test_two_runs_recording_at_once_both_keep_their_creation_time(workspace: str) -> None:
    # Both runs end, and append under the history's lock, at about the same moment.
    procs = [
        subprocess.Popen(
            [*COMMAND_RUN, workspace, "--agent", f"{AGENT} --session-id {name}", "@sleep=0.5 hello"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("left", "right")
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    records = {r.session_id: r for r in history().records()}
    assert sorted(records) == ["left", "right"]
    assert all(r.created_at() is not None for r in records.values())


WRITER = """
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from remote_acp.cli.history import SessionHistory, SessionRecord
history, writer = SessionHistory(Path(sys.argv[1])), int(sys.argv[2])
base = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
for i in range(int(sys.argv[3])):
    created = (base + timedelta(seconds=writer, microseconds=i)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    history.add(SessionRecord(f"{writer}-{i}", "a", "local", "/w", "t", "turn_completed", created=created))
"""


def test_creation_times_appended_by_many_processes_at_once_are_all_kept(tmp_path: Path) -> None:
    writers, each = 6, 40
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(w), str(each)], stderr=subprocess.PIPE)
        for w in range(writers)
    ]
    errors = [p.communicate(timeout=60)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * writers, errors
    history = SessionHistory(tmp_path)
    base = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    kept = {r.session_id: r.created_at() for r in history.records()}
    assert len(history.path.read_text().splitlines()) == writers * each  # no torn or lost line
    assert kept == {
        f"{w}-{i}": base + timedelta(seconds=w, microseconds=i) for w in range(writers) for i in range(each)
    }


def test_records_without_a_creation_time_still_read_and_hold_nothing(workspace: str, tmp_path: Path) -> None:
    # A record written before creation times were kept, and one with an unreadable time.
    history().add(SessionRecord("old-1", "a", "local", workspace, "2026-11-30T12:00:00Z", "turn_completed"))
    history().add(SessionRecord("odd-1", "a", "local", workspace, "t", "turn_completed", created="not a time"))
    assert [r.session_id for r in history().recent()] == ["odd-1", "old-1"]
    assert history().created("old-1", workspace) is None and history().created("odd-1", workspace) is None
    done = cli("run", "--json", "--agent", AGENT, "--workspace", workspace, "--resume", "old-1", "hi")
    assert done.returncode == 0, done.stderr
    assert json_lines(done.stdout)[-1]["load_held_s"] is None
