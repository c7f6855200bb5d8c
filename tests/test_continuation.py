"""Continuing saved sessions through real agent subprocesses: every route, its confirmation,
its fallback and its bounds; the load spacing; credential verification."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from remote_acp import ErrorKind, Event, Notification, RemoteAcpError, SessionStarted, open_session
from remote_acp.session.continuation import NEGATIVE_CONTROL, OriginLedger
from remote_acp.session.verification import verify_credentials
from tests.support.agents import fast_options, scripted, sdk_agent

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio


class FakeClock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def sent(record: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in record.read_text().splitlines()]


def methods(record: Path) -> list[object]:
    return [m.get("method", "<answer>") for m in sent(record)]


async def saved_session(workspace: str, state: Path, *agent_args: str) -> str:
    """A session with two turns, kept in the scripted agent's state directory."""
    async with open_session(workspace, fast_options(scripted("--state-dir", str(state), *agent_args))) as s:
        assert (await s.run_turn("first words")).ok
        assert (await s.run_turn("second words")).ok
        return s.session_id


@pytest.fixture
def state(tmp_path: Path) -> Path:
    path = tmp_path / "agent-state"
    path.mkdir()
    return path


# A ledger that knows none of our sessions: no load is held.
FRESH = OriginLedger()


async def test_load_confirmed_by_replay(workspace: str, state: Path, tmp_path: Path) -> None:
    saved = await saved_session(workspace, state)
    record = tmp_path / "rec.jsonl"
    agent = scripted("--state-dir", str(state), "--advertise", "load", "--record", str(record))
    events: list[Event] = []
    async with open_session(workspace, fast_options(agent), resume=saved, ledger=OriginLedger()) as s:
        assert s.info is not None and s.info.obtained == "loaded" and s.session_id == saved
        result = await s.run_turn("third", events.append)
        assert result.ok
    messages = sent(record)
    assert [m.get("method") for m in messages[:4]] == ["initialize", NEGATIVE_CONTROL, "session/load", "session/prompt"]
    assert messages[2]["params"] == {"sessionId": saved, "cwd": workspace, "mcpServers": []}
    # The replay is delivered after the next turn's session_started, marked as replayed; the
    # live reply is not.
    assert isinstance(events[0], SessionStarted)
    replayed = [e for e in events if isinstance(e, Notification) and e.replayed and e.delta is None]
    assert [e.message for e in replayed] == ["first words", "second words"]
    live = [e for e in events if isinstance(e, Notification) and not e.replayed and e.delta is None]
    assert live[-1].message == "third"
    assert all(e.timestamp <= events[0].timestamp for e in replayed)  # dated when they arrived


async def test_load_replayed_after_its_answer_is_still_confirmed(workspace: str, state: Path) -> None:
    saved = await saved_session(workspace, state)
    agent = scripted("--state-dir", str(state), "--advertise", "load", "--load-replay", "after")
    events: list[Event] = []
    async with open_session(workspace, fast_options(agent), resume=saved, ledger=FRESH) as s:
        assert s.info is not None and s.info.obtained == "loaded"
        assert (await s.run_turn("third", events.append)).ok
    # The whole replay is history, the part that trailed the confirming chunk included; only the
    # reply to the prompt is live.
    replayed = [e.message for e in events if isinstance(e, Notification) and e.replayed and e.delta is None]
    live = [e.message for e in events if isinstance(e, Notification) and not e.replayed and e.delta is None]
    assert replayed == ["first words", "second words"]
    assert live[-1] == "third" and "first words" not in live and "second words" not in live


async def test_load_without_replay_falls_back_to_a_new_session(workspace: str, state: Path) -> None:
    saved = await saved_session(workspace, state)
    agent = scripted("--state-dir", str(state), "--advertise", "load", "--load-replay", "none")
    events: list[Event] = []
    async with open_session(workspace, fast_options(agent, read_timeout_ms=300), resume=saved, ledger=FRESH) as s:
        assert s.info is not None and s.info.obtained == "fell back"
        assert s.session_id != saved
        assert (await s.run_turn("hello", events.append)).ok
    notices = [e.message for e in events if isinstance(e, Notification) and e.delta is None]
    assert notices[0] == "this session started with a declared capability gap in: token counts, session continuation"
    assert notices[1] == (
        f"could not continue session {saved} (session/load answered but replayed no message); "
        "started a new session instead"
    )


async def test_resume_confirms_itself(workspace: str, state: Path, tmp_path: Path) -> None:
    saved = await saved_session(workspace, state)
    record = tmp_path / "rec.jsonl"
    agent = scripted("--state-dir", str(state), "--advertise", "resume", "--record", str(record))
    events: list[Event] = []
    async with open_session(workspace, fast_options(agent), resume=saved, ledger=FRESH) as s:
        assert s.info is not None and s.info.obtained == "resumed" and s.session_id == saved
        assert (await s.run_turn("go on", events.append)).ok
    resume = next(m for m in sent(record) if m.get("method") == "session/resume")
    assert resume["params"] == {"sessionId": saved, "cwd": workspace}  # no servers: mcpServers omitted
    assert not any(isinstance(e, Notification) and e.replayed for e in events)
    assert "session continuation" not in [e for e in events if isinstance(e, Notification)][0].message


async def test_load_is_preferred_over_resume(workspace: str, state: Path, tmp_path: Path) -> None:
    saved = await saved_session(workspace, state)
    record = tmp_path / "rec.jsonl"
    agent = scripted("--state-dir", str(state), "--advertise", "load,resume", "--record", str(record))
    async with open_session(workspace, fast_options(agent), resume=saved, ledger=FRESH) as s:
        assert s.info is not None and s.info.obtained == "loaded"
    assert "session/resume" not in methods(record)


async def test_no_continuation_advertised(workspace: str, state: Path, tmp_path: Path) -> None:
    saved = await saved_session(workspace, state)
    record = tmp_path / "rec.jsonl"
    agent = scripted("--state-dir", str(state), "--record", str(record))
    async with open_session(workspace, fast_options(agent), resume=saved, ledger=FRESH) as s:
        assert s.info is not None and s.info.obtained == "fell back"
    assert methods(record) == ["initialize", "session/new"]  # no probe, no continuation call


@pytest.mark.parametrize(
    ("flag", "code", "log_line"),
    [
        ("--load-error=-32603:broken store", -32603, "continuation call failed"),
        ("--load-error=-32601:Method not found", -32601, "continuation method not implemented"),
    ],
)
async def test_load_error_falls_back_and_is_told_apart_by_the_probe(
    workspace: str, state: Path, caplog: pytest.LogCaptureFixture, flag: str, code: int, log_line: str
) -> None:
    caplog.set_level(logging.DEBUG, logger="remote_acp.session.continuation")
    saved = await saved_session(workspace, state)
    agent = scripted("--state-dir", str(state), "--advertise", "load", flag)
    async with open_session(workspace, fast_options(agent), resume=saved, ledger=FRESH) as s:
        assert s.info is not None and s.info.obtained == "fell back"
    records = [r for r in caplog.records if r.getMessage() == log_line]
    assert len(records) == 1 and records[0].__dict__["code"] == code


@pytest.mark.parametrize("method", ["session/load", NEGATIVE_CONTROL])
async def test_unanswered_probe_or_load_falls_back_within_read_timeout(
    workspace: str, state: Path, method: str
) -> None:
    saved = await saved_session(workspace, state)
    agent = scripted("--state-dir", str(state), "--advertise", "load", "--never-answer", method)
    async with open_session(workspace, fast_options(agent, read_timeout_ms=300), resume=saved, ledger=FRESH) as s:
        assert s.info is not None and s.info.obtained == "fell back"


async def test_resume_error_falls_back(workspace: str, state: Path) -> None:
    agent = scripted("--state-dir", str(state), "--advertise", "resume", "--resume-error=-32603:gone")
    async with open_session(workspace, fast_options(agent), resume="sess-9", ledger=FRESH) as s:
        assert s.info is not None and s.info.obtained == "fell back"


async def test_connection_lost_during_continuation_fails_the_start(workspace: str, state: Path) -> None:
    agent = scripted("--state-dir", str(state), "--advertise", "load", "--crash-at", "session/load", "--exit-code", "6")
    with pytest.raises(RemoteAcpError) as info:
        async with open_session(workspace, fast_options(agent), resume="sess-1", ledger=FRESH):
            pass
    assert info.value.kind is ErrorKind.PORT_EXIT
    assert info.value.message == "the agent runtime exited before responding: exit status 6"


@pytest.mark.both_backends
@pytest.mark.parametrize("advertise", ["load", "resume"])
async def test_sdk_agent_routes(workspace: str, advertise: str) -> None:
    # A fresh SDK agent process does not know the session: both routes fail and fall back.
    async with open_session(workspace, fast_options(sdk_agent("--advertise", advertise)), resume="0" * 32) as s:
        assert s.info is not None and s.info.obtained == "fell back"
        assert (await s.run_turn("hello")).ok


async def test_load_of_a_session_created_here_waits_out_its_minute(
    workspace: str, state: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="remote_acp.session.continuation")
    clock = FakeClock(datetime(2026, 11, 30, 12, 0, 59, 700_000, tzinfo=UTC))
    ledger = OriginLedger(clock)
    agent = fast_options(scripted("--state-dir", str(state), "--advertise", "load"))
    async with open_session(workspace, agent, ledger=ledger) as s:
        created = s.session_id
        assert (await s.run_turn("remember me")).ok
    clock.now += timedelta(milliseconds=100)  # still the same UTC minute: 0.2 s to go
    async with open_session(workspace, agent, resume=created, ledger=ledger) as s:
        assert s.info is not None and s.info.obtained == "loaded"
    held = [r for r in caplog.records if r.getMessage() == "holding session/load until the creation minute is over"]
    assert len(held) == 1 and held[0].__dict__["hold_s"] == 0.2


def test_origin_ledger_bounds() -> None:
    clock = FakeClock(datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC))
    ledger = OriginLedger(clock)
    ledger.record("/w", "a")
    assert ledger.hold_for("/w", "a") == 60.0  # at most one minute
    assert ledger.hold_for("/w", "unknown") == 0.0
    assert ledger.hold_for("/other", "a") == 0.0
    clock.now += timedelta(seconds=45)
    assert ledger.hold_for("/w", "a") == 15.0
    clock.now += timedelta(seconds=20)
    assert ledger.hold_for("/w", "a") == 0.0
    clock.now += timedelta(minutes=5)
    ledger.record("/w", "b")  # old entries are forgotten
    assert ledger.hold_for("/w", "a") == 0.0


# -- credential verification --------------------------------------------------------------------


async def test_verification_succeeds_and_deletes_when_advertised(workspace: str, tmp_path: Path) -> None:
    record = tmp_path / "rec.jsonl"
    agent = scripted("--advertise", "close,delete", "--record", str(record), "--name", "checker")
    verdict = await verify_credentials(workspace, fast_options(agent))
    assert (verdict.agent_name, verdict.agent_version, verdict.session_id) == ("checker", "1.0.0", "sess-1")
    assert methods(record) == ["initialize", "session/new", "session/delete"]


async def test_verification_closes_when_only_close_is_advertised(workspace: str, tmp_path: Path) -> None:
    record = tmp_path / "rec.jsonl"
    await verify_credentials(workspace, fast_options(scripted("--advertise", "close", "--record", str(record))))
    assert methods(record) == ["initialize", "session/new", "session/close"]


async def test_failed_delete_is_a_warning(workspace: str, caplog: pytest.LogCaptureFixture) -> None:
    agent = scripted("--advertise", "delete", "--never-answer", "session/delete")
    await verify_credentials(workspace, fast_options(agent, stop_grace_ms=400))
    assert any(
        r.levelno == logging.WARNING and r.getMessage() == "session/delete did not complete before the wait ended"
        for r in caplog.records
    )


@pytest.mark.parametrize("flag", ["--init-error=-32000:no key", "--new-error=-32000:no key"])
async def test_verification_refused(workspace: str, flag: str) -> None:
    with pytest.raises(RemoteAcpError) as info:
        await verify_credentials(workspace, fast_options(scripted(flag)))
    assert info.value.kind is ErrorKind.CREDENTIAL_UNVERIFIED
    assert str(info.value) == "the agent runtime refused its credential: 'no key'"


async def test_verification_of_a_runtime_that_exits(workspace: str) -> None:
    with pytest.raises(RemoteAcpError) as info:
        await verify_credentials(workspace, fast_options(scripted("--crash-at", "new", "--stderr", "not logged in")))
    assert info.value.kind is ErrorKind.PORT_EXIT
    assert info.value.message == "the agent runtime exited before responding: exit status 3"
    assert info.value.detail == "not logged in"


async def test_a_late_replay_during_the_fallback_is_not_taken_for_the_new_session() -> None:
    from remote_acp.protocol.normalize import Normalizer
    from remote_acp.session.capabilities import CapabilityRecord
    from remote_acp.session.continuation import _fall_back

    normalizer = Normalizer(pid=1)
    normalizer.session_id = "old"  # the load that was not confirmed
    events: list[Event] = []
    late = {
        "sessionId": "old",
        "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "from the past"}},
    }

    class Handshake:
        """Stands in for the agent connection: the late replay arrives while session/new is out."""

        async def new_session(self, cwd: str, timeout_ms: int) -> str:
            normalizer.on_update(late, events.append)
            return "new"

    result = await _fall_back(
        Handshake(),  # type: ignore[arg-type]
        "/w",
        1000,
        normalizer,
        CapabilityRecord(remote=False),
        OriginLedger(),
        "session/load answered but replayed no message",
    )
    assert (result.obtained, result.session_id) == ("fell back", "new")
    assert events == []
