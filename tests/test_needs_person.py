"""Requests only a person could answer, asked by a real agent process: during a turn, between
turns, and the protocol violations that are not (fs/*, terminal/*)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import anyio
import pytest

from remote_acp import ErrorKind, Event, Malformed, Notification, TurnCompleted, TurnInputRequired, open_session
from remote_acp.protocol.unattended import ELICITATION_NOTICE, NO_REFUSAL_NOTICE, REFUSED_NOTICE
from tests.support.agents import fast_options, scripted, wait_until

pytestmark = pytest.mark.anyio

ASKING_AGENT = Path(__file__).resolve().parent / "agents" / "asking_agent.py"


# Time for the agent to read (and record) every answer before teardown ends it, on a loaded
# machine: what is asserted is what it received.
UNHURRIED = {"read_timeout_ms": 10_000, "stop_grace_ms": 10_000}


def asking(record: Path) -> list[str]:
    return [sys.executable, str(ASKING_AGENT), "--record", str(record)]


def received(record: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in record.read_text().splitlines()]


def notices(events: list[Event]) -> list[str]:
    return [e.message for e in events if isinstance(e, Notification) and e.delta is None]


@pytest.mark.both_backends
async def test_permission_without_a_refusing_option_needs_a_person(
    workspace: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    record = tmp_path / "rec.jsonl"
    events: list[Event] = []
    async with open_session(workspace, fast_options(asking(record), **UNHURRIED)) as s:
        result = await s.run_turn("noreject", events.append)
    assert result.error is not None and result.error.kind is ErrorKind.TURN_INPUT_REQUIRED
    assert not result.error.retryable
    assert (
        str(result.error) == "agent asked for a decision only a person can make: a permission with no refusing option"
    )
    assert isinstance(events[-1], TurnInputRequired)
    assert NO_REFUSAL_NOTICE in notices(events)
    messages = received(record)
    answer = next(m for m in messages if m.get("id") == 0 and "method" not in m)
    assert answer["result"] == {"outcome": {"outcome": "cancelled"}}
    assert [m["method"] for m in messages if m.get("method") == "session/cancel"] == ["session/cancel"]
    assert "agent asked for a decision only a person can make, ending the attempt" in caplog.messages


async def test_refusable_permission_is_refused_and_the_turn_goes_on(workspace: str, tmp_path: Path) -> None:
    record = tmp_path / "rec.jsonl"
    events: list[Event] = []
    async with open_session(workspace, fast_options(asking(record), **UNHURRIED)) as s:
        result = await s.run_turn("reject", events.append)
    assert result.ok
    assert REFUSED_NOTICE in notices(events)
    answer = next(m for m in received(record) if m.get("id") == 0 and "method" not in m)
    assert answer["result"] == {"outcome": {"outcome": "selected", "optionId": "no"}}


async def test_elicitation_needs_a_person(workspace: str, tmp_path: Path) -> None:
    record = tmp_path / "rec.jsonl"
    events: list[Event] = []
    async with open_session(workspace, fast_options(asking(record), **UNHURRIED)) as s:
        result = await s.run_turn("elicit", events.append)
    assert result.error is not None and result.error.kind is ErrorKind.TURN_INPUT_REQUIRED
    assert str(result.error) == "agent asked for a decision only a person can make: an answer to a question"
    assert ELICITATION_NOTICE in notices(events)
    answer = next(m for m in received(record) if m.get("id") == 0 and "method" not in m)
    assert answer["error"] == {"code": -32601, "message": "method not found"}


async def test_fs_and_terminal_requests_are_malformed_and_the_turn_goes_on(workspace: str, tmp_path: Path) -> None:
    record = tmp_path / "rec.jsonl"
    events: list[Event] = []
    async with open_session(workspace, fast_options(asking(record), **UNHURRIED)) as s:
        result = await s.run_turn("fs terminal", events.append)
    assert result.ok and isinstance(events[-1], TurnCompleted)
    malformed = [(e.message, e.detail) for e in events if isinstance(e, Malformed)]
    assert malformed == [
        ("the agent called a method this client does not implement", "fs/read_text_file"),
        ("the agent called a method this client does not implement", "terminal/create"),
    ]
    answers = [m for m in received(record) if "method" not in m]
    assert [a["error"] for a in answers] == [{"code": -32601, "message": "method not found"}] * 2


async def test_request_between_turns_ends_the_next_turn_without_a_prompt(workspace: str, tmp_path: Path) -> None:
    record = tmp_path / "rec.jsonl"
    async with open_session(workspace, fast_options(asking(record), **UNHURRIED)) as s:
        first = await s.run_turn("late")
        assert first.ok
        await wait_until(lambda: s._inbox.latched is not None)  # the agent asks between turns
        events: list[Event] = []
        with anyio.fail_after(2):
            second = await s.run_turn("never sent", events.append)

        def answered() -> list[dict[str, object]]:
            return [m for m in received(record) if m.get("id") == 0 and "method" not in m]

        # The agent records what it reads: wait for our answer while it still runs (on a loaded
        # machine it may read it after the turn ended, and teardown would stop it first).
        await wait_until(lambda: bool(answered()))
    assert second.error is not None and second.error.kind is ErrorKind.TURN_INPUT_REQUIRED
    assert NO_REFUSAL_NOTICE in notices(events)  # delivered with the turn it ended
    prompts = [m for m in received(record) if m.get("method") == "session/prompt"]
    assert len(prompts) == 1
    (answer,) = answered()
    assert answer["result"] == {"outcome": {"outcome": "cancelled"}}


async def test_log_names_the_unknown_request(workspace: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="remote_acp.session")
    async with open_session(workspace, fast_options(scripted())) as s:
        assert (await s.run_turn("@vendor-request ok")).ok
    assert any(
        r.getMessage() == "answered an agent request with method not found"
        and r.__dict__["method"] == "craft/drainMidTurnQueue"
        for r in caplog.records
    )
