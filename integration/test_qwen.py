"""The real qwen-code runtime (pinned by ``scripts/install-qwen.sh``) driven through our client.

Every test starts its own OpenAI mock and its own qwen process, with an isolated ``HOME`` under
``tmp_path`` (managed auto-memory off, so no background model calls run after a turn). The
environment is built inside the test, after the suite's orphan marker is set, so every qwen process
carries the marker; it is passed whole to the launch (``env_allowlist`` + ``extra_env``), so what
``qwen_env`` removed (proxies, qwen's relaunch plumbing) is not inherited back from ``os.environ``.

What qwen sends and what we answer is observed on the wire itself: the tests tap the agent
process's stdin writes and stdout reads (``wire`` fixture, see ``integration/qwen_fixtures.py``).
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

import anyio
import pytest

from integration.qwen_fixtures import completed_messages, deltas, qwen_options, qwen_target
from remote_acp import (
    ErrorKind,
    Event,
    Notification,
    RemoteAcpError,
    SessionStarted,
    ToolResult,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    open_session,
)
from remote_acp.protocol.jsonrpc import METHOD_NOT_FOUND
from remote_acp.protocol.unattended import REFUSED_NOTICE
from tests.support.openai_mock import ErrorReply, TextReply, write_file_call
from tests.support.orphans import MARKER_NAME, find_marked
from tests.support.qwen import QWEN_VERSION

if TYPE_CHECKING:
    from pathlib import Path

    from integration.qwen_fixtures import WireTap
    from tests.support.openai_mock import OpenAIMock

pytestmark = [pytest.mark.anyio, pytest.mark.qwen, pytest.mark.usefixtures("qwen_installed")]


@pytest.mark.both_backends
async def test_handshake_and_streamed_text_turns(workspace: str, tmp_path: Path, mock: OpenAIMock) -> None:
    replies = [
        "The quick brown fox jumps over the lazy dog.",
        "Second answer, streamed in several small pieces.",
        "Third and last reply of this session.",
    ]
    mock.enqueue(*(TextReply(text, chunk_size=8, chunk_delay=0.02) for text in replies))
    prompts = ["first question", "second question", "third question"]
    async with open_session(workspace, qwen_options(), qwen_target(tmp_path / "home", mock)) as s:
        assert s.info is not None
        assert (s.info.agent_name, s.info.agent_version) == ("qwen-code", QWEN_VERSION)
        assert s.session_id and s.pid is not None
        pid = s.pid
        assert pid in find_marked(os.environ[MARKER_NAME])  # the orphan check sees qwen
        for turn_number, (prompt, reply) in enumerate(zip(prompts, replies, strict=True)):
            events: list[Event] = []
            result = await s.run_turn(prompt, events.append)
            assert result.ok, result
            assert (result.outcome, result.stop_reason) == ("turn_completed", "end_turn")
            assert isinstance(events[0], SessionStarted)
            assert isinstance(events[-1], TurnCompleted)
            # Streamed: several deltas (qwen closes a reply with an empty one), then one whole message.
            pieces = deltas(events)
            assert len([p for p in pieces if p]) >= 3, pieces
            assert "".join(pieces) == reply
            # The first turn declares the session's capability gaps (qwen advertises session/load).
            notice = (
                ["this session started with a declared capability gap in: token counts"] if turn_number == 0 else []
            )
            assert completed_messages(events) == [*notice, reply]
            streamed = [i for i, e in enumerate(events) if isinstance(e, Notification) and e.delta]
            completed = [i for i, e in enumerate(events) if isinstance(e, Notification) and e.delta is None]
            assert completed[-1] > streamed[-1]  # the whole message comes after its chunks
            assert result.last_message == reply and s.last_message == reply
            assert result.session_id == s.session_id
            assert all(e.session_id == s.session_id and e.pid == pid for e in events)
        assert s.pid == pid
    turns = mock.turn_requests()
    assert len(turns) == 3 and all(r.stream for r in turns)
    for request, prompt in zip(turns, prompts, strict=True):
        assert prompt in request.last_user_text


async def test_write_file_permission_is_refused(
    workspace: str, out_file: Path, tmp_path: Path, mock: OpenAIMock, wire: WireTap
) -> None:
    mock.enqueue(write_file_call(str(out_file), "hello\n"))
    events: list[Event] = []
    async with open_session(workspace, qwen_options("default"), qwen_target(tmp_path / "home", mock)) as s:
        with anyio.fail_after(45):  # a request left unanswered would hang the turn, not end it
            result = await s.run_turn("create out.txt saying hello", events.append)
        session_id = s.session_id
    assert result.ok and result.outcome == "turn_completed" and result.stop_reason == "end_turn"
    assert not await anyio.Path(out_file).exists()

    notices = [e.message for e in events if isinstance(e, Notification) and e.message == REFUSED_NOTICE]
    assert notices == [REFUSED_NOTICE]
    tools = [e for e in events if isinstance(e, ToolResult)]
    assert len(tools) == 1
    tool = tools[0]
    assert (tool.tool_name, tool.error) == ("edit", True)
    notice = next(e for e in events if isinstance(e, Notification) and e.message == REFUSED_NOTICE)
    assert events.index(notice) < events.index(tool)
    assert isinstance(events[-1], TurnCompleted)

    # On the wire: qwen asked, offering a reject_once option "cancel", and we picked it.
    (asked,) = wire.their_requests("session/request_permission")
    assert asked["params"]["sessionId"] == session_id
    assert asked["params"]["toolCall"]["toolCallId"] == tool.tool_call_id
    assert {"optionId": "cancel", "name": "Reject", "kind": "reject_once"} in asked["params"]["options"]
    answer = wire.our_answer(asked["id"])
    refused = {"outcome": {"outcome": "selected", "optionId": "cancel"}}
    assert answer == {"jsonrpc": "2.0", "id": asked["id"], "result": refused}
    # qwen's vendor request is answered "method not found" (and the turn then completes).
    drains = wire.their_requests("craft/drainMidTurnQueue")
    assert drains
    for drain in drains:
        assert wire.our_answer(drain["id"])["error"]["code"] == METHOD_NOT_FOUND
    # The refusal reached the model's next step only as a cancelled tool: nothing asked again.
    assert len(mock.turn_requests()) == 1


async def test_tool_result_keeps_the_title_sent_before_the_terminal_update(
    workspace: str, out_file: Path, tmp_path: Path, mock: OpenAIMock, wire: WireTap
) -> None:
    mock.enqueue(write_file_call(str(out_file), "hello\n"))
    events: list[Event] = []
    async with open_session(workspace, qwen_options("default"), qwen_target(tmp_path / "home", mock)) as s:
        result = await s.run_turn("create out.txt saying hello", events.append)
    assert result.ok
    (tool,) = [e for e in events if isinstance(e, ToolResult)]
    # Every title qwen gave this call: in session/update (tool_call "WriteFile") and in the
    # permission request's toolCall; the terminal (failed) update carries none.
    described = [
        m["params"]["update"] if m.get("method") == "session/update" else m["params"]["toolCall"]
        for m in wire.theirs()
        if m.get("method") in ("session/update", "session/request_permission")
    ]
    titles = [d["title"] for d in described if d.get("toolCallId") == tool.tool_call_id and d.get("title")]
    assert titles
    assert tool.message in titles, (tool.message, titles)


async def test_cancel_while_the_model_is_streaming(
    workspace: str, tmp_path: Path, mock: OpenAIMock, wire: WireTap
) -> None:
    hold = threading.Event()
    mock.enqueue(TextReply("first piece, and the rest is held back by the mock", chunk_size=10, hold=hold))
    try:
        async with open_session(workspace, qwen_options(), qwen_target(tmp_path / "home", mock)) as s:
            seen: list[Event] = []
            async with s.turn("tell me a long story") as turn:
                with anyio.fail_after(45):
                    async for event in turn:
                        seen.append(event)
                        if isinstance(event, Notification) and event.delta:
                            turn.cancel()
            assert turn.result is not None
            assert turn.result.outcome == "turn_cancelled"
            assert turn.result.error is not None and turn.result.error.kind is ErrorKind.TURN_CANCELLED
            assert turn.result.stop_reason == "cancelled"  # qwen's own answer ended the turn
            last = seen[-1]
            assert isinstance(last, TurnCancelled) and last.stop_reason == "cancelled"
            assert "".join(deltas(seen)) == "first piec"
            hold.set()
            follow_up = await s.run_turn("are you still there?")
            assert follow_up.ok and follow_up.last_message == "Default reply from the mock."
            session_id = s.session_id
    finally:
        hold.set()
    cancels = [m for m in wire.ours() if m.get("method") == "session/cancel"]
    assert cancels == [{"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}]


async def test_model_api_error_fails_the_prompt(workspace: str, tmp_path: Path, mock: OpenAIMock) -> None:
    mock.enqueue(ErrorReply(400, "the mock rejects this request"))
    events: list[Event] = []
    async with open_session(workspace, qwen_options(), qwen_target(tmp_path / "home", mock)) as s:
        result = await s.run_turn("this one fails", events.append)
        assert result.error is not None and result.error.kind is ErrorKind.RESPONSE_ERROR
        assert result.outcome == "turn_failed" and result.stop_reason is None
        assert str(result.error).startswith("session/prompt error -32603"), str(result.error)
        last = events[-1]
        assert isinstance(last, TurnFailed) and last.error_kind == "response_error"
        assert last.message == str(result.error)
        # The session survives the failed prompt.
        follow_up = await s.run_turn("try again")
    assert follow_up.ok and follow_up.last_message == "Default reply from the mock."


async def test_missing_api_key_is_credential_unverified(
    workspace: str, tmp_path: Path, mock: OpenAIMock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    target = qwen_target(tmp_path / "home", mock, without=("OPENAI_API_KEY",))
    assert "OPENAI_API_KEY" not in target.environment()
    with pytest.raises(RemoteAcpError) as info:
        async with open_session(workspace, qwen_options(), target):
            pytest.fail("the session started without a credential")
    err = info.value
    assert err.kind is ErrorKind.CREDENTIAL_UNVERIFIED
    text = str(err)
    assert text.startswith("the agent runtime refused its credential: "), text
    # The runtime's own words, quoted.
    assert "Missing API key" in text and "OPENAI_API_KEY" in text, text
    assert not [r for r in mock.requests if r.kind in ("turn", "json", "background")]
