"""How a turn ends, and how permission requests are answered: pure decisions, no I/O.

The ``session/prompt`` response's ``stopReason`` decides the turn unless the client itself
induced the ending (a cancellation, a timeout, a stall, a request only a person could answer);
those overrides are applied by the session before this table is consulted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from ..errors import ErrorKind
from ..events import TurnCancelled, TurnCompleted, TurnEnded, TurnFailed
from .normalize import cap_text

__all__ = ["Disposition", "choose_refusal", "disposition_for_stop_reason"]


@dataclass(frozen=True, slots=True)
class Disposition:
    """The terminal event type, error kind (``None`` for success) and message of a turn."""

    event: type[TurnEnded]
    error_kind: ErrorKind | None
    message: str


_BY_STOP_REASON: Final[dict[str, Disposition]] = {
    "end_turn": Disposition(TurnCompleted, None, "the agent completed the turn"),
    "refusal": Disposition(TurnFailed, ErrorKind.TURN_REFUSED, "the agent refused to answer the prompt"),
    "max_tokens": Disposition(
        TurnFailed, ErrorKind.TURN_TOKEN_LIMIT, "the agent stopped at its token limit for the turn"
    ),
    "max_turn_requests": Disposition(
        TurnFailed,
        ErrorKind.TURN_REQUEST_LIMIT,
        "the agent stopped at its model-request limit for the turn; a new turn starts a new budget",
    ),
}

_CANCELLED_AS_ASKED: Final = Disposition(TurnCancelled, ErrorKind.TURN_CANCELLED, "the turn was cancelled")
_CANCELLED_UNASKED: Final = Disposition(
    TurnFailed,
    ErrorKind.TURN_FAILED,
    "agent reported a cancelled stop reason without a cancellation on either side",
)


def disposition_for_stop_reason(stop_reason: Any, *, cancel_requested: bool) -> Disposition:
    """Map a ``stopReason`` value to the turn's ending."""
    if stop_reason == "cancelled":
        return _CANCELLED_AS_ASKED if cancel_requested else _CANCELLED_UNASKED
    known = _BY_STOP_REASON.get(stop_reason) if isinstance(stop_reason, str) else None
    if known is not None:
        return known
    shown = stop_reason if isinstance(stop_reason, str) else repr(stop_reason)
    return Disposition(
        TurnFailed,
        ErrorKind.TURN_OUTCOME_UNKNOWN,
        cap_text(f'agent reported an unrecognized stop reason: "{shown}"'),
    )


def choose_refusal(params: Any) -> str | None:
    """The option id that refuses a permission request, or ``None`` when none refuses.

    The first ``reject_once`` in the order sent wins, then the first ``reject_always``; an
    allowing option is never chosen, whatever its id or name says.
    """
    options = params.get("options") if isinstance(params, dict) else None
    if not isinstance(options, list):
        return None
    for wanted in ("reject_once", "reject_always"):
        for option in options:
            if isinstance(option, dict) and option.get("kind") == wanted:
                option_id = option.get("optionId")
                if isinstance(option_id, str):
                    return option_id
    return None
