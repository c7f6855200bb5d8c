"""What the qwen-code integration tests share: fixtures, the wire tap, option and target builders.

The fixtures (``qwen_installed``, ``mock``, ``out_file``, ``wire``) are registered for the whole
``integration`` folder by ``integration/conftest.py``; a qwen test module asks for the installed
runtime with ``pytest.mark.usefixtures("qwen_installed")`` in its ``pytestmark``. Everything else is
imported by name.

The wire is observed where it is spoken: :class:`WireTap` wraps ``AgentProcess.write_stdin`` and
``AgentProcess.read_stdout`` and keeps, for every agent process, the raw bytes each way and the
JSON-RPC messages decoded from them line by line, in order, with the time each was seen.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pytest

from remote_acp import Event, LocalTarget, Notification, SessionOptions
from remote_acp.targets.process.agent import AgentProcess
from tests.support.agents import fast_options
from tests.support.openai_mock import OpenAIMock
from tests.support.qwen import QWEN_VERSION, qwen_command, qwen_env, qwen_executable

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

__all__ = [
    "QUIET_SETTINGS",
    "Json",
    "Line",
    "WireTap",
    "completed",
    "completed_messages",
    "deltas",
    "mock",
    "out_file",
    "qwen_installed",
    "qwen_options",
    "qwen_target",
    "wire",
]

Json = dict[str, Any]
Direction = Literal["out", "in"]

#: Keep qwen from running its post-turn memory-extraction subagent against the mock.
QUIET_SETTINGS = {"memory": {"enableManagedAutoMemory": False}}


# -- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
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


@pytest.fixture
def mock() -> Iterator[OpenAIMock]:
    with OpenAIMock(default_text="Default reply from the mock.") as server:
        yield server


@pytest.fixture
def out_file(workspace: str) -> Path:
    """Where the mock model asks qwen to write (an absolute, resolved path in the workspace)."""
    return Path(workspace).resolve() / "out.txt"


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> WireTap:
    """Every agent process's stdin writes and stdout reads, for the length of the test."""
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


# -- the wire -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Chunk:
    """One ``write_stdin`` (``out``) or ``read_stdout`` (``in``) of one process, as raw bytes."""

    process: AgentProcess = field(repr=False, compare=False)
    direction: Direction
    data: bytes


@dataclass(frozen=True)
class Line:
    """One JSON-RPC message: ``out`` we wrote it to the agent, ``in`` we read it from the agent."""

    process: AgentProcess = field(repr=False, compare=False)
    direction: Direction
    message: Json
    at: float  # time.monotonic() when the chunk carrying its end was written or read


class WireTap:
    """What went to and came from agent processes: the raw chunks and the messages decoded from
    them, each process's lines decoded on their own, all in the order they happened.

    A tap covers every process of the test; :meth:`of` narrows it to one process, with the same
    queries (and ``lines`` indices that count that process's lines only).
    """

    def __init__(self, chunks: Sequence[Chunk] = (), lines: Sequence[Line] = ()) -> None:
        self.chunks: list[Chunk] = list(chunks)
        self.lines: list[Line] = list(lines)
        # Keyed by id() of a process that ``chunks`` keeps alive, so an id is never shared.
        self._partial: dict[tuple[int, Direction], bytearray] = {}

    def feed(self, process: AgentProcess, direction: Direction, data: bytes) -> None:
        self.chunks.append(Chunk(process, direction, data))
        buffer = self._partial.setdefault((id(process), direction), bytearray())
        buffer.extend(data)
        *complete, rest = bytes(buffer).split(b"\n")
        buffer[:] = rest
        now = time.monotonic()
        for raw in complete:
            try:
                message = json.loads(raw)
            except ValueError:
                continue  # the ssh env preamble, or a line cut short when the session closed a pipe
            if isinstance(message, dict):
                self.lines.append(Line(process, direction, message, now))

    def of(self, pid: int | None) -> WireTap:
        """The wire of the latest process with this pid."""
        found = [p for p in dict.fromkeys(c.process for c in self.chunks) if p.pid == pid]
        assert found, f"no process {pid} on the wire"
        process = found[-1]
        return WireTap(
            [c for c in self.chunks if c.process is process], [ln for ln in self.lines if ln.process is process]
        )

    # -- raw bytes and messages

    @property
    def sent(self) -> bytes:
        """Everything written to the agent, byte for byte (an ssh env preamble included)."""
        return b"".join(c.data for c in self.chunks if c.direction == "out")

    def ours(self) -> list[Json]:
        return [ln.message for ln in self.lines if ln.direction == "out"]

    def theirs(self) -> list[Json]:
        return [ln.message for ln in self.lines if ln.direction == "in"]

    def our_methods(self) -> list[str]:
        return [m["method"] for m in self.ours() if "method" in m]

    def their_requests(self, method: str) -> list[Json]:
        return [m for m in self.theirs() if m.get("method") == method and "id" in m]

    def our_answer(self, request_id: Any) -> Json:
        """Our one answer to the agent's request ``request_id``."""
        answers = [m for m in self.ours() if "method" not in m and m.get("id") == request_id]
        assert len(answers) == 1, f"expected one answer to request {request_id!r}, got {answers}"
        return answers[0]

    # -- positions in ``lines``

    def index(self, predicate: Callable[[Line], bool]) -> int:
        found = [i for i, line in enumerate(self.lines) if predicate(line)]
        assert found, "no such line on the wire"
        return found[0]

    def our_request(self, method: str) -> int:
        """Where we first sent ``method``."""
        return self.index(lambda ln: ln.direction == "out" and ln.message.get("method") == method)

    def their_answer(self, request_id: Any) -> int:
        """Where the agent answered our request ``request_id``."""
        return self.index(
            lambda ln: ln.direction == "in" and "method" not in ln.message and ln.message.get("id") == request_id
        )


# -- options, targets and events ----------------------------------------------------------------


def qwen_options(approval_mode: str = "default", **overrides: Any) -> SessionOptions:
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
    return fast_options(qwen_command(approval_mode=approval_mode), **values)


def qwen_target(home: Path, mock: OpenAIMock, *, without: tuple[str, ...] = ()) -> LocalTarget:
    """A local target whose environment is exactly ``qwen_env`` for ``home`` (minus ``without``),
    passed whole, so what ``qwen_env`` removed is not inherited back from ``os.environ``. Two
    targets built on the same ``home`` give two qwen processes that share their saved sessions."""
    env = qwen_env(home, mock, extra_settings=QUIET_SETTINGS)
    for name in without:
        env.pop(name, None)
    return LocalTarget(env_allowlist=tuple(env), extra_env=env)


def deltas(events: Sequence[Event]) -> list[str]:
    return [e.delta for e in events if isinstance(e, Notification) and e.delta is not None]


def completed(events: Sequence[Event]) -> list[Notification]:
    """The whole messages (not their streamed chunks)."""
    return [e for e in events if isinstance(e, Notification) and e.delta is None]


def completed_messages(events: Sequence[Event]) -> list[str]:
    return [e.message for e in completed(events)]
