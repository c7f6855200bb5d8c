"""Turn ``session/update`` notifications into normalized events, without I/O.

Theory of operation: the session feeds each notification's params to
:meth:`Normalizer.on_update` together with an ``emit`` callable; the normalizer dispatches on the
``sessionUpdate`` discriminator through a table and builds events directly from the parsed dict.
No schema model is validated per chunk: that is what keeps a 100,000-chunk turn cheap.

Reply text is accumulated per ``messageId`` (capped at :data:`MESSAGE_CAP` runes) and reported
once as a whole message when it ends: a chunk of another message, a ``user_message_chunk``, any
other event-producing update, a turn boundary or the end of the stream (:meth:`flush`).

Everything the agent wrote that an event carries is masked (:attr:`Normalizer.secrets`) before
it is capped. Streamed text is masked as a stream: a chunk's end that could still be the start
of a secret is held back and sent with the next chunk, or as a last delta when the message ends.
Every ``malformed`` event goes through :meth:`Normalizer.malformed`, which bounds and masks its
detail and rate-limits (an agent can provoke them at will): the count dropped is reported in an
event of its own before the next one that passes, and at the end of a turn
(:meth:`Normalizer.flush_dropped`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ..events import Event, Malformed, Notification, OtherMessage, ToolResult, utc_now
from ..logs import get_logger
from ..masking import Masker, StreamMasker
from .ratelimit import TokenBucket

if TYPE_CHECKING:
    from datetime import datetime

__all__ = [
    "DETAIL_CAP",
    "MALFORMED_BURST",
    "MALFORMED_RATE",
    "MESSAGE_CAP",
    "TOOL_CALL_ID_BOUND",
    "TOOL_KINDS",
    "Normalizer",
    "cap_text",
    "normalize_tool_kind",
    "vendor_token_figure",
]

log = get_logger("remote_acp.events")

MESSAGE_CAP: Final = 500
DETAIL_CAP: Final = 240
"""A malformed event's detail: room for a reason and a 200-byte excerpt of the line."""
TOOL_CALL_ID_BOUND: Final = 256
"""Longer tool call ids are refused (a malformed event): each would be repeated in an event."""
MALFORMED_BURST: Final = 20
MALFORMED_RATE: Final = 5.0
"""Malformed events: :data:`MALFORMED_BURST` at once, then this many a second."""
ELLIPSIS: Final = "…"
TOOL_KINDS: Final = frozenset(
    {"read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"}
)
_OPEN_TOOL_CALLS: Final = 1_000
TERMINAL_TOOL_STATUSES: Final = frozenset({"completed", "failed"})
SILENT_UPDATES: Final = frozenset(
    {
        "available_commands_update",
        "current_mode_update",
        "config_option_update",
        "session_info_update",
        "usage_update",
    }
)

Emit = Callable[[Event], None]


@dataclass(slots=True)
class _ToolCall:
    kind: str
    started: float
    title: str


def cap_text(text: str, cap: int = MESSAGE_CAP) -> str:
    """Cut ``text`` to at most ``cap`` runes, ending a cut text with an ellipsis."""
    return text if len(text) <= cap else text[: cap - 1] + ELLIPSIS


def normalize_tool_kind(kind: Any) -> str:
    return kind if isinstance(kind, str) and kind in TOOL_KINDS else "other"


VENDOR_TOKEN_FIELD: Final = "_meta.quota.token_count"
_TOKEN_BOUND: Final = 1 << 53  # a count past this is not a count


def vendor_token_figure(result: Any) -> tuple[int, int] | None:
    """The (input, output) token figure a runtime put on a prompt result, if any: Gemini CLI's
    ``_meta.quota.token_count``. A presence signal and a lower bound only (it counts the turn's
    main calls, not their cache reads, reasoning or side calls), never spend."""
    node: Any = result
    for key in ("_meta", "quota", "token_count"):
        node = node.get(key) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        return None
    counts = node.get("input_tokens"), node.get("output_tokens")
    if not all(type(c) is int and 0 <= c < _TOKEN_BOUND for c in counts):
        return None
    return counts[0], counts[1]  # type: ignore[return-value]  # both checked to be int above


def _terminal_status(status: Any) -> bool:
    # JSON values may be lists or objects, which cannot be looked up in a set.
    return isinstance(status, str) and status in TERMINAL_TOOL_STATUSES


class Normalizer:
    """Per-session normalizer state: the open message, open tool calls, last message."""

    def __init__(
        self, *, pid: int | None = None, secrets: tuple[str, ...] = (), clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.pid = pid
        self.session_id: str | None = None
        self.batch_time: datetime | None = None
        """When the read being dispatched arrived: every event it yields carries that time (one
        clock reading per read, not per chunk). ``None`` outside a read."""
        self.replaying = False
        """Set while ``session/load`` replays history: events are marked ``replayed``."""
        self.replay_chunks = 0
        """Message chunks seen while replaying (evidence that a load really replayed)."""
        self.last_message = ""
        self._msg_open = False
        self._msg_id: Any = None
        self._msg_parts: list[str] = []
        self._msg_len = 0
        self._msg_at: datetime | None = None
        self._msg_replayed = False
        self._tools: dict[str, _ToolCall] = {}
        self._unknown_logged = False
        self._masker = Masker(secrets)
        self._stream = StreamMasker(self._masker)
        self._clock = clock
        self._bucket = TokenBucket(MALFORMED_BURST, MALFORMED_RATE)
        self._handlers: dict[str, Callable[[dict[str, Any], Emit], None]] = {
            "agent_message_chunk": self._agent_message_chunk,
            "user_message_chunk": self._user_message_chunk,
            "agent_thought_chunk": self._thought_chunk,
            "plan": self._plan,
            "tool_call": self._tool_call,
            "tool_call_update": self._tool_call_update,
        }

    @property
    def secrets(self) -> tuple[str, ...]:
        """Values masked in everything the agent wrote before an event carries it."""
        return self._masker.secrets

    @secrets.setter
    def secrets(self, values: tuple[str, ...]) -> None:
        self._masker = Masker(values)
        self._stream = StreamMasker(self._masker)

    @property
    def masker(self) -> Masker:
        """The masker for this session's secrets (to quote the agent's text elsewhere)."""
        return self._masker

    # -- entry points -------------------------------------------------------------------------

    def on_update(self, params: Any, emit: Emit) -> None:
        """Normalize one ``session/update`` notification's params."""
        if type(params) is not dict:
            self.malformed(emit, "received a session update without parameters")
            return
        if self.session_id is not None and params.get("sessionId") != self.session_id:
            if log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "dropping session/update for a foreign session",
                    extra={"foreign": self._masker.quote(self._shown(params.get("sessionId")), DETAIL_CAP)},
                )
            return
        update = params.get("update")
        if type(update) is not dict:
            self.malformed(emit, "received a session update without an update object")
            return
        kind = update.get("sessionUpdate")
        handler = self._handlers.get(kind) if isinstance(kind, str) else None
        if handler is not None:
            handler(update, emit)
        elif isinstance(kind, str) and kind in SILENT_UPDATES:
            log.debug("session update without an event", extra={"session_update": kind})
        else:
            shown = self._shown(kind)
            if not self._unknown_logged:
                self._unknown_logged = True
                log.debug(
                    "unrecognized session update", extra={"session_update": self._masker.quote(shown, DETAIL_CAP)}
                )
            self.malformed(emit, "received a session update of an unrecognized kind", shown)

    def malformed(self, emit: Emit, message: str, detail: str = "", *, detail_cut: bool = False) -> None:
        """Report something the agent sent that this client could not use: the one door of every
        ``malformed`` event. ``detail`` (the agent's own text) is masked, escaped and bounded;
        ``detail_cut``: it was already cut from something longer. Past the rate limit the event is
        dropped and counted; the count is reported before the next event that passes."""
        if not self._bucket.take(self._clock()):
            return
        self.flush(emit)
        self.flush_dropped(emit)
        emit(
            Malformed(
                timestamp=self.batch_time or utc_now(),
                pid=self.pid,
                session_id=self.session_id,
                message=self._masker.quote(message, MESSAGE_CAP),
                detail=self._masker.quote(detail, DETAIL_CAP, cut=detail_cut) if detail else "",
            )
        )

    def flush_dropped(self, emit: Emit) -> None:
        """Report how many malformed events the rate limit dropped, if any (the session calls
        this when a turn ends, so a flood that stopped is still counted)."""
        dropped = self._bucket.take_dropped()
        if dropped:
            emit(
                Malformed(
                    timestamp=self.batch_time or utc_now(),
                    pid=self.pid,
                    session_id=self.session_id,
                    message=f"{dropped} more malformed input{' was' if dropped == 1 else 's were'} dropped",
                )
            )

    def flush(self, emit: Emit) -> None:
        """Report the open message, if any (turn boundaries and end of stream)."""
        if not self._msg_open:
            return
        if self._stream.holding:
            # The held end of the stream could no longer become a secret: send it now.
            rest = self._stream.finish()
            if self._msg_len <= MESSAGE_CAP:
                self._msg_parts.append(rest)
                self._msg_len += len(rest)
            emit(
                Notification(
                    # The held text arrived with the message's last chunk: dated then, not when the
                    # next event closed the message (a replayed one would otherwise be dated mid-turn).
                    timestamp=self._msg_at or self.batch_time or utc_now(),
                    pid=self.pid,
                    session_id=self.session_id,
                    message="",
                    delta=rest,
                    replayed=self._msg_replayed,
                )
            )
        text = "".join(self._msg_parts)
        self._msg_open = False
        self._msg_parts = []
        self._msg_len = 0
        if not text:
            return  # chunks that carried only metadata (qwen's usage chunk) are no message
        message = cap_text(text)
        self.last_message = message
        assert self._msg_at is not None
        emit(
            Notification(
                timestamp=self._msg_at,
                pid=self.pid,
                session_id=self.session_id,
                message=message,
                replayed=self._msg_replayed,
            )
        )

    # -- variants -----------------------------------------------------------------------------

    def _agent_message_chunk(self, update: dict[str, Any], emit: Emit) -> None:
        content = update.get("content")
        text = content.get("text") if type(content) is dict and content.get("type") == "text" else None
        if type(text) is not str:
            self.malformed(emit, "agent sent a message chunk this client does not render")
            return
        message_id = update.get("messageId")
        if self._msg_open and (message_id != self._msg_id or self._msg_replayed != self.replaying):
            self.flush(emit)
        now = self.batch_time or utc_now()
        if not self._msg_open:
            self._msg_open = True
            self._msg_id = message_id
            self._msg_replayed = self.replaying
        if self._masker:  # most sessions carry no secret: no call per chunk for them
            text = self._stream.feed(text)
        if self._msg_len <= MESSAGE_CAP:
            self._msg_parts.append(text)
            self._msg_len += len(text)
        self._msg_at = now
        if self.replaying:
            self.replay_chunks += 1
        emit(
            Notification(
                timestamp=now,
                pid=self.pid,
                session_id=self.session_id,
                message="",
                delta=text,
                replayed=self.replaying,
            )
        )

    def _user_message_chunk(self, update: dict[str, Any], emit: Emit) -> None:
        self.flush(emit)
        if self.replaying:
            self.replay_chunks += 1

    def _thought_chunk(self, update: dict[str, Any], emit: Emit) -> None:
        self._other(emit, "reasoning block")

    def _plan(self, update: dict[str, Any], emit: Emit) -> None:
        self._other(emit, "plan update")

    def _tool_call(self, update: dict[str, Any], emit: Emit) -> None:
        call_id = update.get("toolCallId")
        if not isinstance(call_id, str):
            self.malformed(emit, "received a tool call without a tool call id")
            return
        if len(call_id) > TOOL_CALL_ID_BOUND:
            self.malformed(
                emit,
                f"received a tool call whose id is {len(call_id)} characters long, over the bound of "
                f"{TOOL_CALL_ID_BOUND}",
                call_id,
            )
            return
        title = update.get("title")
        if len(self._tools) >= _OPEN_TOOL_CALLS and call_id not in self._tools:
            del self._tools[next(iter(self._tools))]  # calls that never finish must not pile up
        self._tools[call_id] = _ToolCall(normalize_tool_kind(update.get("kind")), time.monotonic(), self._title(title))
        if _terminal_status(update.get("status")):
            # Some runtimes announce a call that already finished; it still gets its result.
            self._tool_call_update(update, emit)

    def _tool_call_update(self, update: dict[str, Any], emit: Emit) -> None:
        call_id = update.get("toolCallId")
        if not isinstance(call_id, str) or call_id not in self._tools:
            return  # an update with no matching begin produces no event
        call = self._tools[call_id]
        # Updates carry only what changed: remember the latest kind and title.
        if update.get("kind") is not None:  # null means "not given", like an absent field
            call.kind = normalize_tool_kind(update["kind"])
        title = update.get("title")
        if isinstance(title, str):
            call.title = self._title(title)
        status = update.get("status")
        if not _terminal_status(status):
            return
        del self._tools[call_id]
        self.flush(emit)
        emit(
            ToolResult(
                timestamp=self.batch_time or utc_now(),
                pid=self.pid,
                session_id=self.session_id,
                tool_name=call.kind,
                tool_call_id=self._masker.mask(call_id),
                duration_ms=int((time.monotonic() - call.started) * 1000),
                error=status == "failed",
                message=call.title,
                replayed=self.replaying,
            )
        )

    # -- helpers ------------------------------------------------------------------------------

    def _other(self, emit: Emit, message: str) -> None:
        self.flush(emit)
        emit(
            OtherMessage(
                timestamp=self.batch_time or utc_now(),
                pid=self.pid,
                session_id=self.session_id,
                message=message,
                replayed=self.replaying,
            )
        )

    def _title(self, title: Any) -> str:
        # Masked before it is capped, and capped when kept: a thousand open calls stay small.
        return self._masker.excerpt(title, MESSAGE_CAP) if isinstance(title, str) else ""

    def _shown(self, value: Any) -> str:
        """A value the agent sent, as text to quote: strings and scalars as they are, a
        structure by its kind only (its text could be huge or nest without bound)."""
        if isinstance(value, str):
            return value  # bounded where it is quoted, after masking
        if value is None or isinstance(value, bool | int | float):
            return str(value)
        return "a JSON object" if isinstance(value, dict) else "a JSON array" if isinstance(value, list) else "a value"
