"""Hostile text from a real agent: secrets it quotes back, control characters, forged log lines,
oversized identifiers and floods of malformed input, through ``open_session`` and ``run_turn``.

The secret is an environment variable of the agent with a secret-looking name, as a credential
would be; the scriptable agent reads it back into the place each test names.
"""

from __future__ import annotations

import json
import logging
import re
from typing import TYPE_CHECKING, Any

import pytest

from remote_acp import (
    ErrorKind,
    Event,
    LocalTarget,
    Malformed,
    Notification,
    RemoteAcpError,
    ToolResult,
    open_session,
)
from remote_acp.cli.logging_setup import TextFormatter
from remote_acp.masking import MASK
from remote_acp.protocol.normalize import MALFORMED_BURST, TOOL_CALL_ID_BOUND
from remote_acp.protocol.wire import SESSION_ID_BOUND
from remote_acp.session.continuation import OriginLedger
from tests.support.agents import fast_options, scripted

if TYPE_CHECKING:
    from remote_acp import TurnResult

pytestmark = pytest.mark.anyio

SECRET = "sk-hostile-5f0c7a2e9b41d8"
HOSTILE = f"{SECRET}\n2026-01-01 error: forged line\x1b[2J\x1b]0;pwned\x07"
ENV = {"HOSTILE_TEST_API_KEY": SECRET}
TARGET = LocalTarget(extra_env=ENV)


@pytest.fixture(autouse=True)
def hostile_text(monkeypatch: pytest.MonkeyPatch) -> None:
    # Inherited, not chosen: a value passed on purpose (extra_env) would be masked whole, and
    # what is under test here is the escaping of the text around the secret.
    monkeypatch.setenv("HOSTILE_TEXT", HOSTILE)


async def turn(workspace: str, prompt: str, *agent_args: str) -> tuple[TurnResult, list[Event]]:
    events: list[Event] = []
    async with open_session(workspace, fast_options(scripted(*agent_args)), TARGET) as session:
        result = await session.run_turn(prompt, events.append)
    return result, events


def leaked(result: TurnResult, events: list[Event]) -> list[str]:
    """Every string that leaves the process holding the secret."""
    out = [json.dumps(e.to_json()) for e in events] + [json.dumps(result.to_json()), result.last_message]
    return [text for text in out if SECRET in text or "sk-hostile" in text]


async def test_secret_in_a_tool_title_is_masked(workspace: str) -> None:
    result, events = await turn(workspace, "done @title-from=HOSTILE_TEST_API_KEY")
    assert result.ok
    (tool,) = [e for e in events if isinstance(e, ToolResult)]
    assert tool.message == MASK
    assert leaked(result, events) == []


async def test_secret_streamed_in_the_reply_is_masked_across_chunks(workspace: str) -> None:
    result, events = await turn(workspace, "@say-from=HOSTILE_TEST_API_KEY")
    assert result.ok
    deltas = "".join(e.delta or "" for e in events if isinstance(e, Notification))
    assert deltas == MASK
    assert result.last_message == MASK
    assert leaked(result, events) == []


async def test_secret_in_an_unrecognized_stop_reason_is_masked_and_escaped(workspace: str) -> None:
    result, events = await turn(workspace, "done @stop-from=HOSTILE_TEXT")
    assert result.error_kind is ErrorKind.TURN_OUTCOME_UNKNOWN
    assert f"{MASK}\\n2026-01-01 error: forged line\\x1b[2J" in result.message
    assert "\n" not in result.message and "\x1b" not in result.message
    assert result.stop_reason is not None and result.stop_reason.startswith(MASK)
    assert leaked(result, events) == []


async def test_unrecognized_update_is_masked_escaped_in_the_event_and_the_debug_log(
    workspace: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="remote_acp"):
        result, events = await turn(workspace, "done @update-from=HOSTILE_TEXT")
    assert result.ok
    (bad,) = [e for e in events if isinstance(e, Malformed)]
    assert bad.detail.startswith(f"{MASK}\\n2026-01-01 error: forged line\\x1b[2J")
    assert leaked(result, events) == []
    formatter = TextFormatter()
    lines = [formatter.format(r) for r in caplog.records]
    assert any("unrecognized session update" in line for line in lines)
    for line in lines:
        assert SECRET not in line
        assert "\n" not in line and "\x1b" not in line and "\x07" not in line


async def test_failed_continuation_notice_masks_the_runtimes_words(workspace: str, tmp_path: Any) -> None:
    state = tmp_path / "agent-state"
    state.mkdir()
    args = ("--state-dir", str(state), "--advertise", "load", f"--load-error=-32603:store broken for {SECRET}\x1b[2J")
    async with open_session(workspace, fast_options(scripted(*args)), TARGET) as session:
        saved = session.session_id
    events: list[Event] = []
    # A ledger that never saw the session: this test is about the notice, not the load spacing.
    fresh = OriginLedger()
    async with open_session(workspace, fast_options(scripted(*args)), TARGET, resume=saved, ledger=fresh) as session:
        assert session.info is not None and session.info.obtained == "fell back"
        result = await session.run_turn("hello", events.append)
    notices = [e.message for e in events if isinstance(e, Notification) and "could not continue" in e.message]
    assert len(notices) == 1
    assert f"store broken for {MASK}\\x1b[2J" in notices[0]
    assert leaked(result, events) == []


async def test_flood_of_malformed_lines_is_rate_limited_and_counted(workspace: str) -> None:
    result, events = await turn(workspace, "done @garbage-lines=2000")
    assert result.ok
    malformed = [e for e in events if isinstance(e, Malformed)]
    counts = [re.fullmatch(r"(\d+) more malformed inputs? (?:was|were) dropped", e.message) for e in malformed]
    dropped = sum(int(m.group(1)) for m in counts if m)
    passed = [m for m in counts if m is None]
    assert MALFORMED_BURST <= len(passed) < 2000
    assert len(passed) + dropped == 2000  # every line is either reported or counted


async def test_over_long_tool_call_id_is_refused(workspace: str) -> None:
    result, events = await turn(workspace, f"done @long-tool-id={TOOL_CALL_ID_BOUND * 400}")
    assert result.ok
    assert not [e for e in events if isinstance(e, ToolResult)]
    (bad,) = [e for e in events if isinstance(e, Malformed)]
    assert f"is {TOOL_CALL_ID_BOUND * 400} characters long" in bad.message
    assert sum(len(json.dumps(e.to_json())) for e in events) < 10_000


@pytest.mark.parametrize(
    ("session_id", "why"),
    [
        ("s" * 100_000, f"the agent's session id is 100000 characters long, over the bound of {SESSION_ID_BOUND}"),
        ("sess\n2026-01-01 error: forged", "the agent's session id holds a control character"),
    ],
)
async def test_session_id_over_the_bound_fails_the_start(workspace: str, session_id: str, why: str) -> None:
    with pytest.raises(RemoteAcpError) as caught:
        async with open_session(workspace, fast_options(scripted("--session-id", session_id)), TARGET):
            pass
    assert caught.value.kind is ErrorKind.RESPONSE_ERROR
    assert why in str(caught.value)
    assert len(str(caught.value)) < 1_000
