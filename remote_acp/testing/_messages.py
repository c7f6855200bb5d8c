"""What the scripted agent says: ACP payloads, reply pieces, long lines, reading answers to its
requests, and the waits a turn yields."""

from __future__ import annotations

import time

from remote_acp.testing._process import TYPE_CHECKING
from remote_acp.testing._wire import PIECE

if TYPE_CHECKING:
    from collections.abc import Generator, Iterable
    from typing import NoReturn

    from remote_acp.testing._wire import Json

HUGE_OPTION_ID_CHARS = 4 * 1024 * 1024

PLAN_ENTRIES = [
    {"content": "Read the code", "priority": "high", "status": "pending"},
    {"content": "Write the fix", "priority": "low", "status": "in_progress"},
]


def text_block(text: str) -> Json:
    return {"type": "text", "text": text}


def chunk_message(sid: str, text: str, message_id: str) -> Json:
    update = {"sessionUpdate": "agent_message_chunk", "messageId": message_id, "content": text_block(text)}
    return {"method": "session/update", "params": {"sessionId": sid, "update": update}}


def permission_params(sid: str) -> Json:
    return {
        "sessionId": sid,
        "toolCall": {"toolCallId": "call-2", "title": "Write file", "kind": "edit"},
        "options": [
            {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
            {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
            {"optionId": "reject-always", "name": "Always reject", "kind": "reject_always"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
        ],
    }


def huge_permission_params(sid: str) -> Json:
    return {
        "sessionId": sid,
        "toolCall": {"toolCallId": "call-3", "title": "Huge request", "kind": "other"},
        "options": [{"optionId": "r" * HUGE_OPTION_ID_CHARS, "name": "Reject", "kind": "reject_once"}],
    }


def long_line(size: int) -> Iterable[bytes]:
    """``size`` bytes (a JSON string of ``a`` when size >= 2) plus ``\\n``, in 64 KiB pieces."""
    quoted = size >= 2
    body = size - 2 if quoted else size
    piece = b"a" * PIECE
    if quoted:
        yield b'"'
    full, rest = divmod(body, PIECE)
    for _ in range(full):
        yield piece
    yield piece[:rest]
    yield b'"\n' if quoted else b"\n"


def split_text(text: str, parts: int) -> list[str]:
    """``parts`` contiguous slices of ``text`` (one per character if ``parts`` exceeds its length)."""
    if parts <= 0:
        return []
    count = max(1, min(parts, len(text)))
    size, extra = divmod(len(text), count)
    pieces: list[str] = []
    start = 0
    for index in range(count):
        end = start + size + (1 if index < extra else 0)
        pieces.append(text[start:end])
        start = end
    return pieces


def describe_answer(answer: Json) -> tuple[str, str]:
    """``("error", code)`` or ``("result", outcome text)`` for a response to one of our requests."""
    error = answer.get("error")
    if error is not None:
        code = error.get("code") if isinstance(error, dict) else None
        return "error", str(code)
    result = answer.get("result")
    outcome = result.get("outcome") if isinstance(result, dict) else None
    if isinstance(outcome, dict) and outcome.get("outcome") == "selected":
        return "result", f"selected {outcome.get('optionId')}"
    if isinstance(outcome, dict) and isinstance(outcome.get("outcome"), str):
        return "result", str(outcome["outcome"])
    return "result", "invalid"


class Wait:
    """What a suspended turn waits for: a deadline, the answer to one of our requests, or neither."""

    __slots__ = ("deadline", "request_id")

    def __init__(self, deadline: float | None = None, request_id: int | None = None) -> None:
        self.deadline = deadline
        self.request_id = request_id


def describe_servers(servers: list[Json]) -> str:
    """``name(transport)`` of each server, comma-separated (``none``); never a value of env or
    headers, only their names, so a test can see what arrived without the agent echoing secrets."""
    if not servers:
        return "none"
    described = []
    for server in servers:
        transport = server.get("type", "stdio") if isinstance(server, dict) else "?"
        keys = server.get("env" if transport == "stdio" else "headers", []) if isinstance(server, dict) else []
        names = "+".join(str(k.get("name")) for k in keys if isinstance(k, dict))
        name = server.get("name") if isinstance(server, dict) else None
        described.append(f"{name}({transport}{':' + names if names else ''})")
    return ",".join(described)


def sleep_steps(seconds: float) -> Generator[Wait, Json | None, None]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        yield Wait(deadline=deadline)


def forever() -> Generator[Wait, Json | None, NoReturn]:
    while True:
        yield Wait()
