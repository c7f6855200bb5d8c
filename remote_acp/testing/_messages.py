"""What the scripted agent says: ACP payloads, reply pieces, long lines, and reading answers to its requests."""

from __future__ import annotations

from remote_acp.testing._process import TYPE_CHECKING
from remote_acp.testing._wire import PIECE

if TYPE_CHECKING:
    from collections.abc import Iterable

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
