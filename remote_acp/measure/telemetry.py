"""Gemini CLI's local telemetry file, read without I/O: framing, decoding, the token records.

With ``GEMINI_TELEMETRY_TARGET=local`` the CLI appends each exported item as
``JSON.stringify(item, null, 2) + "\\n"``: a stream of pretty-printed objects (not JSON lines),
logs, spans and metrics interleaved, and a trailing object may be half written while the
exporter is mid-flush. Pretty-printing indents every nested line, and a newline inside a string
is escaped, so a top-level object ends exactly where a line holding only ``}`` does: the reader
frames on that, decodes each frame with ``raw_decode``, and leaves a partial frame for the next
read. Memory stays bounded by the largest object, whatever the file's size.

A token record is a log record whose ``attributes["event.name"]`` is
``gemini_cli.api_response``; ``attributes["session.id"]`` is the ACP session id (the resource's
``session.id`` is a process-level id and is not used). A record counts only when it carries every
counter read here, as integers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["API_RESPONSE", "COUNTERS", "Figure", "TokenRecord", "frame_objects", "sum_records", "token_record"]

API_RESPONSE: Final = "gemini_cli.api_response"
COUNTERS: Final = (
    "input_token_count",
    "output_token_count",
    "cached_content_token_count",
    "thoughts_token_count",
    "tool_token_count",
    "total_token_count",
)
_END: Final = b"\n}\n"
_EMPTY: Final = b"{}\n"


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """One model call's counts, as the CLI copied them from the response's ``usageMetadata``."""

    session_id: str
    model: str
    role: str
    """``main`` (the turn itself) or ``utility_router`` (the routing classifier)."""
    input: int  # promptTokenCount: cached tokens included, not subtracted
    output: int  # candidatesTokenCount
    cached: int  # cachedContentTokenCount
    thoughts: int  # thoughtsTokenCount
    tool: int  # toolUsePromptTokenCount
    total: int  # totalTokenCount, passed through


def frame_objects(data: bytes) -> tuple[list[Any], int]:
    """The complete top-level objects at the start of ``data``, and how many bytes they took.

    What follows the last complete object (a partial one) is left for the caller to prepend to
    the next read. A frame that does not decode is skipped (counted as consumed), so one damaged
    object cannot stall the reader.
    """
    decoder = json.JSONDecoder()
    objects: list[Any] = []
    consumed = 0
    while True:
        start = consumed
        while start < len(data) and data[start] in b" \t\r\n":
            start += 1
        if data.startswith(_EMPTY, start):
            objects.append({})
            consumed = start + len(_EMPTY)
            continue
        end = data.find(_END, start)
        if end < 0:
            return objects, (start if start == len(data) else consumed)
        frame_end = end + len(_END)
        try:
            obj, _ = decoder.raw_decode(data[start:frame_end].decode("utf-8", "replace"))
        except ValueError:
            pass  # damaged: skipped
        else:
            objects.append(obj)
        consumed = frame_end


def token_record(obj: Any) -> TokenRecord | None:
    """The token record ``obj`` is, if it is one with every counter."""
    if not isinstance(obj, dict):
        return None
    attributes = obj.get("attributes")
    if not isinstance(attributes, dict) or attributes.get("event.name") != API_RESPONSE:
        return None
    session_id, model, role = attributes.get("session.id"), attributes.get("model"), attributes.get("role")
    if not isinstance(session_id, str) or not isinstance(model, str):
        return None
    counts = [attributes.get(name) for name in COUNTERS]
    ints = [c for c in counts if type(c) is int and c >= 0]
    if len(ints) != len(COUNTERS):
        return None
    return TokenRecord(session_id, model, role if isinstance(role, str) else "", *ints)


@dataclass(frozen=True, slots=True)
class Figure:
    """One turn's figure, in the fields of a ``token_usage`` event."""

    model: str
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    total_tokens: int


def sum_records(records: Iterable[TokenRecord]) -> Figure | None:
    """One turn's figure from its records (``None`` without any): every call counts, the
    routing classifier's included; the model is the last main call's (else the last call's).

    input = prompt + tool-use prompt tokens; output = candidates + thoughts; cache_read = cached
    (already part of input); total = the runtime's own totals, summed."""
    records = list(records)
    if not records:
        return None
    main = [r for r in records if r.role == "main"] or records
    return Figure(
        model=main[-1].model,
        input_tokens=sum(r.input + r.tool for r in records),
        output_tokens=sum(r.output + r.thoughts for r in records),
        cache_read_tokens=sum(r.cached for r in records),
        total_tokens=sum(r.total for r in records),
    )
