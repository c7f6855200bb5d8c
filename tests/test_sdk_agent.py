"""Cross-implementation conformance: our client against an agent built on the official ACP SDK,
and what our client writes on the wire checked against the SDK's own schema models."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from acp.schema import (
    CancelNotification,
    CloseSessionRequest,
    InitializeRequest,
    NewSessionRequest,
    PromptRequest,
    RequestPermissionResponse,
)

from remote_acp import (
    ErrorKind,
    Event,
    Notification,
    OtherMessage,
    SessionStarted,
    ToolResult,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    open_session,
)
from tests.support.agents import fast_options, scripted, sdk_agent

if TYPE_CHECKING:
    from pathlib import Path

    from pydantic import BaseModel

pytestmark = pytest.mark.anyio

REFUSED_NOTICE = "refused a permission request because this run is unattended and no one can approve it"
# The SDK agent advertises no way to continue a session, and nothing measures its tokens.
GAPS = "this session started with a declared capability gap in: token counts, session continuation"


def shape(events: list[Event]) -> list[tuple[str, Any, Any]]:
    """Events without timestamps: (type, message, delta or tool details)."""
    out: list[tuple[str, Any, Any]] = []
    for e in events:
        if isinstance(e, Notification):
            out.append((e.type, e.message, e.delta))
        elif isinstance(e, ToolResult):
            out.append((e.type, e.message, (e.tool_name, e.tool_call_id, e.error)))
        elif isinstance(e, TurnFailed | TurnCompleted | TurnCancelled):
            out.append((e.type, e.error_kind, e.stop_reason))
        elif isinstance(e, OtherMessage):
            out.append((e.type, e.message, None))
        else:
            out.append((e.type, None, None))
    return out


# -- sessions against the SDK agent --------------------------------------------------------------


@pytest.mark.both_backends
async def test_sdk_agent_handshake_and_echo_turn(workspace: str) -> None:
    events: list[Event] = []
    async with open_session(workspace, fast_options(sdk_agent())) as s:
        assert s.info is not None
        assert (s.info.agent_name, s.info.agent_version) == ("sdk-agent", "0.12.1")
        assert s.session_id and s.pid is not None
        result = await s.run_turn("hello there", events.append)
        assert s.last_message == "echo: hello there"
    assert result.ok and result.outcome == "turn_completed" and result.stop_reason == "end_turn"
    assert result.last_message == "echo: hello there"
    assert isinstance(events[0], SessionStarted)
    deltas = [e.delta for e in events if isinstance(e, Notification) and e.delta is not None]
    assert len(deltas) == 3 and "".join(deltas) == "echo: hello there"
    completed = [e.message for e in events if isinstance(e, Notification) and e.delta is None]
    assert completed == [GAPS, "echo: hello there"]
    assert isinstance(events[-1], TurnCompleted)
    assert all(e.session_id == result.session_id and e.pid == s.pid for e in events)


@pytest.mark.both_backends
async def test_sdk_agent_tool_plan_think_sequence(workspace: str) -> None:
    events: list[Event] = []
    async with open_session(workspace, fast_options(sdk_agent())) as s:
        result = await s.run_turn("tool plan think", events.append)
    assert shape(events) == [
        ("session_started", None, None),
        ("notification", GAPS, None),
        ("other_message", "reasoning block", None),
        ("other_message", "plan update", None),
        ("tool_result", "Read notes.txt", ("read", "t1", False)),
        ("turn_completed", None, "end_turn"),
    ]
    assert result.ok


@pytest.mark.both_backends
async def test_sdk_agent_permission_is_refused(workspace: str) -> None:
    events: list[Event] = []
    async with open_session(workspace, fast_options(sdk_agent())) as s:
        result = await s.run_turn("permission", events.append)
    # The SDK agent reports which option it got back: we picked its reject_once option.
    assert shape(events) == [
        ("session_started", None, None),
        ("notification", GAPS, None),
        ("notification", REFUSED_NOTICE, None),
        ("notification", "", "permission: reject"),
        ("notification", "permission: reject", None),
        ("turn_completed", None, "end_turn"),
    ]
    assert result.ok and result.last_message == "permission: reject"


@pytest.mark.both_backends
async def test_sdk_agent_slow_turn_cancelled(workspace: str) -> None:
    async with open_session(workspace, fast_options(sdk_agent())) as s:
        # "think" makes the agent emit a thought before it starts waiting, so the cancel is sent
        # only once the agent is inside the prompt (the SDK agent resets its cancel flag there).
        async with s.turn("slow think") as turn:
            seen: list[Event] = []
            with anyio.fail_after(10):
                async for event in turn:
                    seen.append(event)
                    if isinstance(event, OtherMessage):
                        turn.cancel()
        assert turn.result is not None
        assert turn.result.outcome == "turn_cancelled"
        assert turn.result.error is not None and turn.result.error.kind is ErrorKind.TURN_CANCELLED
        assert turn.result.stop_reason == "cancelled"  # the agent's own answer ended the turn
        last = seen[-1]
        assert isinstance(last, TurnCancelled) and last.stop_reason == "cancelled"
        assert [type(e) for e in seen] == [SessionStarted, Notification, OtherMessage, TurnCancelled]
        follow_up = await s.run_turn("still alive")
    assert follow_up.ok and follow_up.last_message == "echo: still alive"


@pytest.mark.both_backends
async def test_sdk_agent_refusal(workspace: str) -> None:
    events: list[Event] = []
    async with open_session(workspace, fast_options(sdk_agent())) as s:
        result = await s.run_turn("refuse", events.append)
    assert result.error is not None and result.error.kind is ErrorKind.TURN_REFUSED
    assert result.outcome == "turn_failed" and result.stop_reason == "refusal"
    assert shape(events) == [
        ("session_started", None, None),
        ("notification", GAPS, None),
        ("turn_failed", "turn_refused", "refusal"),
    ]


# -- what we write, validated with the SDK's schema models ---------------------------------------


def conforms(model: type[BaseModel], params: Any) -> None:
    """``params`` validates against ``model`` and carries no field the schema does not know."""
    assert isinstance(params, dict)
    validated = model.model_validate(params)
    # Unknown keys are silently ignored by the SDK models; a round trip shows them.
    assert validated.model_dump(mode="json", by_alias=True, exclude_unset=True) == params


async def test_client_messages_conform_to_sdk_schema(workspace: str, tmp_path: Path) -> None:
    record = tmp_path / "wire.jsonl"
    options = fast_options(scripted("--record", str(record), "--advertise", "close"))
    async with open_session(workspace, options) as s:
        first = await s.run_turn("@permission hi")
        assert first.ok and first.last_message == "hi"
        async with s.turn("@sleep=30") as turn:
            with anyio.move_on_after(0.3):
                async for _ in turn:
                    pass
            turn.cancel()
            async for _ in turn:
                pass
        assert turn.result is not None and turn.result.outcome == "turn_cancelled"

    messages = [json.loads(line) for line in record.read_text().splitlines()]
    by_method: dict[str, type[BaseModel]] = {
        "initialize": InitializeRequest,
        "session/new": NewSessionRequest,
        "session/prompt": PromptRequest,
        "session/close": CloseSessionRequest,
    }
    seen: list[str] = []
    request_ids: list[int] = []
    for message in messages:
        assert message.get("jsonrpc") == "2.0", message
        method = message.get("method")
        if method == "session/cancel":
            assert "id" not in message  # a notification
            conforms(CancelNotification, message["params"])
            seen.append(method)
        elif method is not None:
            request_id = message["id"]
            assert type(request_id) is int, message
            request_ids.append(request_id)
            conforms(by_method[method], message["params"])
            seen.append(method)
        else:
            # Our answer to the agent's permission request (the scripted agent uses id 0).
            assert type(message["id"]) is int and message["id"] == 0, message
            assert "error" not in message
            conforms(RequestPermissionResponse, message["result"])
            assert message["result"] == {"outcome": {"outcome": "selected", "optionId": "reject"}}
            seen.append("answer")
    assert seen == [
        "initialize",
        "session/new",
        "session/prompt",
        "answer",
        "session/prompt",
        "session/cancel",
        "session/close",
    ]
    assert request_ids == sorted(set(request_ids))  # unique and increasing
    prompts = [m for m in messages if m.get("method") == "session/prompt"]
    assert [p["params"]["prompt"] for p in prompts] == [
        [{"type": "text", "text": "@permission hi"}],
        [{"type": "text", "text": "@sleep=30"}],
    ]
    init = InitializeRequest.model_validate(messages[0]["params"])
    assert init.protocol_version == 1
    assert init.client_capabilities is not None and init.client_capabilities.terminal is False
    new = NewSessionRequest.model_validate(messages[1]["params"])
    assert new.cwd == workspace and new.mcp_servers == []
