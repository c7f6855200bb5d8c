"""Continuing a saved session with the real qwen-code runtime (pinned by ``scripts/install-qwen.sh``).

qwen advertises ``loadSession: true`` and ``sessionCapabilities.resume``, so the fixed route order
picks ``session/load``. qwen keeps its sessions under its ``HOME``: a second qwen process started
with the same isolated ``HOME`` (and the same workspace) can load what the first one saved.

Every test starts its own OpenAI mock and qwen processes, with an isolated ``HOME`` under
``tmp_path`` and managed auto-memory off (no background model calls after a turn). The environment
is built inside the test, after the suite's orphan marker is set, so every qwen process carries the
marker and the root conftest's orphan check sees any survivor.

What was sent and received is observed on the wire itself (``wire`` fixture): the agent process's
stdin writes and stdout reads are tapped, per process, in the order they happened.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

import pytest

from remote_acp import (
    Event,
    LocalTarget,
    Notification,
    OriginLedger,
    SessionOptions,
    SessionStarted,
    TurnCompleted,
    open_session,
)
from remote_acp.continuation import NEGATIVE_CONTROL
from remote_acp.process import AgentProcess
from tests.support.agents import fast_options
from tests.support.openai_mock import OpenAIMock, RecordedRequest, TextReply
from tests.support.qwen import QWEN_VERSION, qwen_command, qwen_env, qwen_executable

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from pathlib import Path

pytestmark = [pytest.mark.anyio, pytest.mark.qwen]

#: Keep qwen from running its post-turn memory-extraction subagent against the mock.
SETTINGS = {"memory": {"enableManagedAutoMemory": False}}
METHOD_NOT_FOUND = -32601
RESOURCE_NOT_FOUND = -32002
HOLD_LOG = "holding session/load until the creation minute is over"
#: Two qwen processes per test, each needing 2-4 s to initialize (more on a loaded machine).
SLOW = pytest.mark.timeout(150)

Json = dict[str, Any]


@pytest.fixture(scope="module", autouse=True)
def qwen_installed() -> Path:
    """These tests never skip: a missing runtime is a failure, with the way to fix it."""
    exe = qwen_executable()
    if exe is None:
        pytest.fail(
            f"qwen-code {QWEN_VERSION} is not installed under .tools/qwen: run scripts/install-qwen.sh "
            "(idempotent; it installs the pinned release into .tools/qwen)",
            pytrace=False,
        )
    return exe


# -- the wire, per process, in order ------------------------------------------------------------


@dataclass
class Line:
    """One JSON-RPC message: ``out`` we wrote it to the agent, ``in`` we read it from the agent."""

    direction: Literal["out", "in"]
    message: Json
    at: float  # time.monotonic() when the chunk carrying its end was written or read


@dataclass
class ProcessWire:
    lines: list[Line] = field(default_factory=list)
    _partial: dict[str, bytearray] = field(default_factory=lambda: {"out": bytearray(), "in": bytearray()})

    def feed(self, direction: Literal["out", "in"], data: bytes) -> None:
        buffer = self._partial[direction]
        buffer.extend(data)
        *complete, rest = bytes(buffer).split(b"\n")
        buffer[:] = rest
        now = time.monotonic()
        for raw in complete:
            try:
                message = json.loads(raw)
            except ValueError:
                continue
            if isinstance(message, dict):
                self.lines.append(Line(direction, message, now))

    def index(self, predicate: Callable[[Line], bool]) -> int:
        found = [i for i, line in enumerate(self.lines) if predicate(line)]
        assert found, "no such line on the wire"
        return found[0]

    def our_request(self, method: str) -> int:
        return self.index(lambda ln: ln.direction == "out" and ln.message.get("method") == method)

    def their_answer(self, request_id: Any) -> int:
        return self.index(
            lambda ln: ln.direction == "in" and "method" not in ln.message and ln.message.get("id") == request_id
        )

    def our_methods(self) -> list[str]:
        return [ln.message["method"] for ln in self.lines if ln.direction == "out" and "method" in ln.message]


class WireTap:
    """Every agent process's stdin writes and stdout reads, decoded line by line, per process."""

    def __init__(self) -> None:
        # Keyed by id() of a process kept alive here, so neither an id nor a pid is ever shared.
        self._processes: dict[int, tuple[AgentProcess, ProcessWire]] = {}

    def feed(self, process: AgentProcess, direction: Literal["out", "in"], data: bytes) -> None:
        self._processes.setdefault(id(process), (process, ProcessWire()))[1].feed(direction, data)

    def of(self, pid: int | None) -> ProcessWire:
        """The wire of the latest process with this pid."""
        found = [w for process, w in self._processes.values() if process.pid == pid]
        assert found, f"no process {pid} on the wire"
        return found[-1]


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> WireTap:
    tap = WireTap()
    write_stdin = AgentProcess.write_stdin
    read_stdout = AgentProcess.read_stdout

    async def tapped_write(self: AgentProcess, data: bytes) -> None:
        await write_stdin(self, data)
        tap.feed(self, "out", data)

    async def tapped_read(self: AgentProcess) -> bytes:
        data = await read_stdout(self)
        tap.feed(self, "in", data)
        return data

    monkeypatch.setattr(AgentProcess, "write_stdin", tapped_write)
    monkeypatch.setattr(AgentProcess, "read_stdout", tapped_read)
    return tap


@pytest.fixture
def mock() -> Iterator[OpenAIMock]:
    with OpenAIMock(default_text="Default reply from the mock.") as server:
        yield server


def qwen_options(**overrides: Any) -> SessionOptions:
    """Generous bounds: qwen takes 2-4 s to answer initialize, more on a loaded machine."""
    values: dict[str, Any] = {
        "read_timeout_ms": 15_000,
        "initialize_floor_ms": 45_000,
        "turn_timeout_ms": 40_000,
        "stall_timeout_ms": 40_000,
        "stop_grace_ms": 3_000,
        "output_drain_ms": 2_000,
    }
    values.update(overrides)
    return fast_options(qwen_command(approval_mode="default"), **values)


def qwen_target(home: Path, mock: OpenAIMock) -> LocalTarget:
    """A local target whose environment is exactly ``qwen_env`` for ``home``: two targets built on
    the same ``home`` give two qwen processes that share their saved sessions."""
    env = qwen_env(home, mock, extra_settings=SETTINGS)
    return LocalTarget(env_allow=tuple(env), extra_env=env)


class FakeClock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def completed(events: Sequence[Event]) -> list[Notification]:
    return [e for e in events if isinstance(e, Notification) and e.delta is None]


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
    caplog.set_level(logging.DEBUG, logger="remote_acp.continuation")
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
    caplog.set_level(logging.INFO, logger="remote_acp.continuation")
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
