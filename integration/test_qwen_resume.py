"""Continuing a saved session with the real qwen-code runtime (pinned by ``scripts/install-qwen.sh``).

qwen advertises ``loadSession: true`` and ``sessionCapabilities.resume``, so the fixed route order
picks ``session/load``. qwen keeps its sessions under its ``HOME``: a second qwen process started
with the same isolated ``HOME`` (and the same workspace) can load what the first one saved.

Every test starts its own OpenAI mock and qwen processes, with an isolated ``HOME`` under
``tmp_path`` and managed auto-memory off (no background model calls after a turn). The environment
is built inside the test, after the suite's orphan marker is set, so every qwen process carries the
marker and the root conftest's orphan check sees any survivor.

What was sent and received is observed on the wire itself (``wire`` fixture, see
``integration/qwen_fixtures.py``): the agent process's stdin writes and stdout reads are tapped,
per process, in the order they happened.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest

from integration.qwen_fixtures import completed, qwen_options, qwen_target
from remote_acp import (
    Event,
    Notification,
    OriginLedger,
    SessionStarted,
    TurnCompleted,
    open_session,
)
from remote_acp.protocol.jsonrpc import METHOD_NOT_FOUND
from remote_acp.session.continuation import NEGATIVE_CONTROL
from tests.support.openai_mock import TextReply

if TYPE_CHECKING:
    from pathlib import Path

    from integration.qwen_fixtures import WireTap
    from remote_acp import LocalTarget
    from tests.support.openai_mock import OpenAIMock, RecordedRequest

pytestmark = [pytest.mark.anyio, pytest.mark.qwen, pytest.mark.usefixtures("qwen_installed")]

RESOURCE_NOT_FOUND = -32002
HOLD_LOG = "holding session/load until the creation minute is over"
#: Two qwen processes per test, each needing 2-4 s to initialize (more on a loaded machine).
SLOW = pytest.mark.timeout(150)


class FakeClock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def conversation(request: RecordedRequest) -> list[tuple[str, str]]:
    """``(role, text)`` of every user and assistant message the model was sent."""
    out: list[tuple[str, str]] = []
    for message in request.messages:
        role, content = message.get("role"), message.get("content")
        if role not in ("user", "assistant"):
            continue
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        out.append((str(role), content if isinstance(content, str) else ""))
    return out


async def saved_session(workspace: str, target: LocalTarget, prompts: list[str], replies: list[str], **kw: Any) -> str:
    """A qwen session with real turns (the mock answers ``replies``), saved under the target's HOME."""
    async with open_session(workspace, qwen_options(), target, **kw) as s:
        assert s.info is not None and s.info.obtained == "new"
        for prompt, reply in zip(prompts, replies, strict=True):
            result = await s.run_turn(prompt)
            assert result.ok, result
            assert result.last_message == reply
        return s.session_id


# -- tests --------------------------------------------------------------------------------------


@SLOW
async def test_load_replays_and_continues_a_saved_qwen_session(
    workspace: str, tmp_path: Path, mock: OpenAIMock, wire: WireTap
) -> None:
    prompts = ["Tell me about apples.", "And about pears?", "What did we talk about?"]
    replies = ["Apples are crisp and sweet.", "Pears are soft and grainy.", "We talked about apples and pears."]
    mock.enqueue(*(TextReply(text, chunk_size=6, chunk_delay=0.01) for text in replies))
    home = tmp_path / "home"
    created_in = OriginLedger()  # kept apart from the process-wide ledger
    saved = await saved_session(workspace, qwen_target(home, mock), prompts[:2], replies[:2], ledger=created_in)
    assert len(mock.turn_requests()) == 2

    events: list[Event] = []
    target = qwen_target(home, mock)  # a new qwen process, the same HOME
    async with open_session(workspace, qwen_options(), target, resume=saved, ledger=OriginLedger()) as s:
        assert s.info is not None
        assert (s.info.obtained, s.session_id) == ("loaded", saved)
        assert s.capabilities.snapshot()["session continuation"] == "protocol"
        pid = s.pid
        result = await s.run_turn(prompts[2], events.append)
    assert result.ok, result
    assert (result.outcome, result.stop_reason, result.session_id) == ("turn_completed", "end_turn", saved)
    assert result.last_message == replies[2]

    # The replay comes with the next turn, after its session_started: the earlier replies, marked
    # replayed, then the live reply, not replayed. User prompts never become events.
    assert isinstance(events[0], SessionStarted)
    assert isinstance(events[-1], TurnCompleted)
    replayed = [e for e in events if isinstance(e, Notification) and e.replayed]
    assert replayed, events
    assert [e.message for e in completed(replayed)] == replies[:2]
    assert "".join(e.delta or "" for e in replayed) == "".join(replies[:2])
    live = [e for e in events if isinstance(e, Notification) and not e.replayed]
    assert [e.message for e in completed(live)] == [
        "this session started with a declared capability gap in: token counts",
        replies[2],
    ]
    assert "".join(e.delta or "" for e in live) == replies[2]
    last_replayed = max(events.index(e) for e in replayed)
    first_live_text = min(events.index(e) for e in live if e.delta)
    assert 0 < min(events.index(e) for e in replayed) and last_replayed < first_live_text
    texts = [e.message for e in events if isinstance(e, Notification)] + [e.delta or "" for e in replayed]
    assert not any(prompt in text for prompt in prompts for text in texts)
    assert all(e.session_id == saved and e.pid == pid for e in events)
    assert all(e.timestamp <= events[0].timestamp for e in replayed)  # dated when they arrived

    # qwen really continued the conversation: the model saw the earlier exchange, in order.
    turns = mock.turn_requests()
    assert len(turns) == 3
    seen = conversation(turns[2])
    wanted = [
        ("user", prompts[0]),
        ("assistant", replies[0]),
        ("user", prompts[1]),
        ("assistant", replies[1]),
        ("user", prompts[2]),
    ]
    position = 0
    for role, text in seen:
        if position < len(wanted) and role == wanted[position][0] and wanted[position][1] in text:
            position += 1
    assert position == len(wanted), seen

    # On the wire of the second process: the negative control was answered "method not found"
    # before session/load was sent; then the load, then the prompt.
    second = wire.of(pid)
    assert second.our_methods()[:4] == ["initialize", NEGATIVE_CONTROL, "session/load", "session/prompt"]
    probe = second.our_request(NEGATIVE_CONTROL)
    probe_answer = second.their_answer(second.lines[probe].message["id"])
    assert second.lines[probe_answer].message["error"]["code"] == METHOD_NOT_FOUND
    load = second.our_request("session/load")
    assert probe_answer < load
    assert second.lines[load].message["params"] == {"sessionId": saved, "cwd": workspace, "mcpServers": []}
    load_answer = second.their_answer(second.lines[load].message["id"])
    assert "error" not in second.lines[load_answer].message
    # qwen replayed the whole exchange, the prompts included, before answering the load.
    replay = [
        (ln.message["params"]["update"]["sessionUpdate"], ln.message["params"]["update"]["content"]["text"])
        for ln in second.lines[load:load_answer]
        if ln.direction == "in"
        and ln.message.get("method") == "session/update"
        and ln.message["params"]["update"].get("sessionUpdate") in ("user_message_chunk", "agent_message_chunk")
    ]
    assert [(kind, text) for kind, text in replay if text] == [
        ("user_message_chunk", prompts[0]),
        ("agent_message_chunk", replies[0]),
        ("user_message_chunk", prompts[1]),
        ("agent_message_chunk", replies[1]),
    ]


@SLOW
async def test_load_of_an_unknown_session_falls_back_to_a_new_one(
    workspace: str, tmp_path: Path, mock: OpenAIMock, wire: WireTap, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="remote_acp.session.continuation")
    unknown = str(uuid.uuid4())
    mock.enqueue(TextReply("A fresh start."))
    events: list[Event] = []
    target = qwen_target(tmp_path / "home", mock)
    async with open_session(workspace, qwen_options(), target, resume=unknown, ledger=OriginLedger()) as s:
        assert s.info is not None and s.info.obtained == "fell back"
        assert s.session_id and s.session_id != unknown
        assert s.capabilities.snapshot()["session continuation"] == "gap"
        pid = s.pid
        result = await s.run_turn("hello again", events.append)
        new_id = s.session_id
    assert result.ok, result
    assert (result.outcome, result.session_id, result.last_message) == ("turn_completed", new_id, "A fresh start.")
    assert isinstance(events[0], SessionStarted) and isinstance(events[-1], TurnCompleted)
    assert not any(isinstance(e, Notification) and e.replayed for e in events)

    notices = [e.message for e in completed(events)]
    assert notices[0] == "this session started with a declared capability gap in: token counts, session continuation"
    # qwen 0.24.4 answers an unknown id with -32002 "Resource not found: session:<id>".
    reason = f"session/load error {RESOURCE_NOT_FOUND}: Resource not found: session:{unknown}"
    assert notices[1:] == [
        f"could not continue session {unknown} ({reason}); started a new session instead",
        "A fresh start.",
    ]

    # On the wire: probe, load (answered with an error), then a new session, then the prompt.
    ours = wire.of(pid)
    assert ours.our_methods()[:5] == ["initialize", NEGATIVE_CONTROL, "session/load", "session/new", "session/prompt"]
    probe = ours.our_request(NEGATIVE_CONTROL)
    probe_answer = ours.their_answer(ours.lines[probe].message["id"])
    assert ours.lines[probe_answer].message["error"]["code"] == METHOD_NOT_FOUND
    load = ours.our_request("session/load")
    assert probe_answer < load
    answer = ours.lines[ours.their_answer(ours.lines[load].message["id"])].message
    assert answer["error"]["code"] == RESOURCE_NOT_FOUND
    # The probe tells a broken load (-32002) from an unimplemented one (-32601).
    failed = [r for r in caplog.records if r.getMessage() == "continuation call failed"]
    assert [(r.levelno, r.__dict__["code"]) for r in failed] == [(logging.WARNING, RESOURCE_NOT_FOUND)]
    assert not [r for r in caplog.records if r.getMessage() == "continuation method not implemented"]


@SLOW
async def test_load_in_the_creation_minute_is_held_then_confirmed(
    workspace: str, tmp_path: Path, mock: OpenAIMock, wire: WireTap, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="remote_acp.session.continuation")
    # The fake clock says the session is created 0.3 s before the end of a UTC minute, and no time
    # passes on it: the load that follows falls in the same minute and is held for 0.3 s.
    clock = FakeClock(datetime(2026, 11, 30, 12, 0, 59, 700_000, tzinfo=UTC))
    ledger = OriginLedger(clock)
    home = tmp_path / "home"
    mock.enqueue(TextReply("Remembered."), TextReply("Still here."))
    saved = await saved_session(workspace, qwen_target(home, mock), ["remember me"], ["Remembered."], ledger=ledger)
    assert ledger.hold_for(workspace, saved) == pytest.approx(0.3)

    events: list[Event] = []
    async with open_session(workspace, qwen_options(), qwen_target(home, mock), resume=saved, ledger=ledger) as s:
        assert s.info is not None and (s.info.obtained, s.session_id) == ("loaded", saved)
        pid = s.pid
        assert (await s.run_turn("are you there?", events.append)).ok
    held = [r for r in caplog.records if r.getMessage() == HOLD_LOG]
    assert len(held) == 1 and held[0].__dict__["hold_s"] == 0.3
    assert [e.message for e in completed(events) if e.replayed] == ["Remembered."]
    assert [e.message for e in completed(events) if not e.replayed][-1] == "Still here."
    assert ("assistant", "Remembered.") in conversation(mock.turn_requests()[-1])

    # The hold is real time between the probe's answer and the load.
    second = wire.of(pid)
    probe = second.our_request(NEGATIVE_CONTROL)
    probe_answer = second.lines[second.their_answer(second.lines[probe].message["id"])]
    load = second.lines[second.our_request("session/load")]
    assert load.at - probe_answer.at >= 0.29
