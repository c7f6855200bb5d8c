"""The normalized event vocabulary callers see, whatever runtime produced it.

Events are frozen, slotted dataclasses: they are built on the hot path (one per streamed
chunk), where a validating model would cost more than parsing the line did. Each has a stable
JSON form (:meth:`Event.to_json`), used by ``remote-acp run --json``::

    {"type": "notification", "timestamp": "2026-11-30T05:00:00.000000Z", "pid": 4242,
     "session_id": "sess-1", "message": "", "delta": "Hello", "replayed": false}

Field names and ``type`` values are part of the public interface; fields are only ever added.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from .errors import ErrorKind

__all__ = [
    "Event",
    "LinkLost",
    "LinkRestored",
    "Malformed",
    "Notification",
    "OtherMessage",
    "SessionStarted",
    "TERMINAL_EVENTS",
    "TokenLowerBound",
    "TokenUsage",
    "ToolResult",
    "TurnCancelled",
    "TurnCompleted",
    "TurnEnded",
    "TurnFailed",
    "TurnInputRequired",
    "TurnNotStarted",
    "TurnTimedOut",
    "utc_now",
]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """Fields every event carries."""

    type: ClassVar[str] = "event"

    timestamp: datetime
    """When the event happened, in UTC (for a completed message: when its last chunk arrived)."""
    pid: int | None
    """The agent process id (the local ``ssh`` relay's on a remote launch)."""
    session_id: str | None
    """The ACP session id, once known."""

    def to_json(self) -> dict[str, Any]:
        """The stable JSON form: ``type`` first, timestamps as ISO 8601 with a ``Z`` suffix."""
        out: dict[str, Any] = {"type": self.type}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, datetime):
                if value.tzinfo is not None:
                    value = value.astimezone(UTC)
                value = value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            out[f.name] = value
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionStarted(Event):
    """A turn began on the session (emitted first in every turn)."""

    type: ClassVar[str] = "session_started"


@dataclass(frozen=True, slots=True, kw_only=True)
class Notification(Event):
    """Agent text or a notice from the adapter.

    For a streamed chunk ``message`` is empty (it resets the stall timer without replacing the
    last message shown) and ``delta`` holds the chunk's own text; a completed message carries its
    whole (capped) text in ``message`` and no delta.
    """

    type: ClassVar[str] = "notification"
    message: str
    delta: str | None = None
    replayed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class OtherMessage(Event):
    """Agent output that is not reply text: ``reasoning block`` or ``plan update``."""

    type: ClassVar[str] = "other_message"
    message: str
    replayed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult(Event):
    """A tool call reached a terminal status."""

    type: ClassVar[str] = "tool_result"
    tool_name: str
    """The tool's normalized kind (read, edit, delete, move, search, execute, think, fetch,
    switch_mode or other)."""
    tool_call_id: str
    duration_ms: int
    error: bool
    message: str
    replayed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenUsage(Event):
    """One turn's spend, read by a measurement source from the runtime's own records (never from
    ``usage_update``, never from a vendor figure on the prompt result). At most one per turn,
    before its terminal event; a session no source measures emits none ("not measured", not 0).
    See "Token accounting" in docs/library.md for what counts."""

    type: ClassVar[str] = "token_usage"
    model: str
    """The model the turn's own calls went to (the last one, when a turn used several)."""
    input_tokens: int
    """Prompt tokens, cached ones included (``cache_read_tokens`` is the part read from cache)."""
    output_tokens: int
    """Generated tokens, reasoning ("thoughts") included."""
    cache_read_tokens: int
    total_tokens: int
    """The runtime's own total, as it reported it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenLowerBound(Event):
    """A token figure the runtime attached to the prompt result itself (Gemini CLI's
    ``_meta.quota.token_count``). Not spend: it may leave out cache reads, reasoning and side calls,
    so it only says a figure exists and that the turn cost at least this much. Emitted whenever the
    result carries one, measured session or not, before the turn's terminal event."""

    type: ClassVar[str] = "token_lower_bound"
    input_tokens: int
    output_tokens: int
    source: str
    """Where the figure was found on the result (``_meta.quota.token_count``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkLost(Event):
    """The ssh link of a session with a reattach window dropped. The agent goes on on its host,
    and the session reconnects within the window: a :class:`LinkRestored` follows, and the stream
    goes on where it stopped, or the turn fails once the window is over. The turn's own bound keeps
    counting; its stall bound does not count the time without a link."""

    type: ClassVar[str] = "link_lost"
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkRestored(Event):
    """The link is back (after a :class:`LinkLost`): what the agent sent meanwhile follows, each
    event once and in order."""

    type: ClassVar[str] = "link_restored"
    message: str
    down_ms: int
    """How long the session had no link."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Malformed(Event):
    """Something the agent sent that this client could not use; the connection goes on.

    An agent can provoke these at will, so they are rate-limited (20 at once, then 5 a second);
    what was dropped is counted in an event of its own, ``"N more malformed inputs were
    dropped"``, before the next one that passes or when the turn ends. ``detail`` quotes the
    agent's input masked, with control characters escaped, and bounded."""

    type: ClassVar[str] = "malformed"
    message: str
    detail: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnEnded(Event):
    """Base of the terminal events: exactly one ends every turn."""

    type: ClassVar[str] = "turn_ended"
    message: str
    error_kind: ErrorKind | None = None
    """Why the turn did not complete (a ``str`` enum: its JSON form is the kind's value)."""
    stop_reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnCompleted(TurnEnded):
    type: ClassVar[str] = "turn_completed"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnFailed(TurnEnded):
    type: ClassVar[str] = "turn_failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnCancelled(TurnEnded):
    type: ClassVar[str] = "turn_cancelled"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnTimedOut(TurnEnded):
    type: ClassVar[str] = "turn_timed_out"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnInputRequired(TurnEnded):
    type: ClassVar[str] = "turn_input_required"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnNotStarted(TurnEnded):
    """The prompt never reached the agent (a turn already in flight, the connection gone, the
    prompt not taken in time): the only event of such a turn."""

    type: ClassVar[str] = "turn_not_started"


TERMINAL_EVENTS: tuple[type[TurnEnded], ...] = (
    TurnCompleted,
    TurnFailed,
    TurnCancelled,
    TurnTimedOut,
    TurnInputRequired,
    TurnNotStarted,
)
