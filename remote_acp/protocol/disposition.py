"""How a turn ends, and how permission requests are answered: pure decisions, no I/O.

The ``session/prompt`` response's ``stopReason`` decides the turn unless the client itself
induced the ending (a cancellation, a timeout, a stall, a request only a person could answer);
those overrides are applied by the session before this table is consulted.
"""

from __future__ import annotations

import reprlib
from dataclasses import dataclass
from typing import Any, Final

from ..errors import ErrorKind
from ..events import TurnCancelled, TurnCompleted, TurnEnded, TurnFailed
from ..masking import Masker
from .normalize import MESSAGE_CAP, cap_text

__all__ = ["STOP_REASON_CAP", "Disposition", "choose_refusal", "disposition_for_stop_reason", "shown_stop_reason"]

STOP_REASON_CAP: Final = 100
"""An unrecognized stop reason, as events carry it, is bounded to this many characters (masked
first); the turn's message quotes it up to its own bound."""
_NO_SECRETS: Final = Masker()


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


def shown_stop_reason(stop_reason: Any, masker: Masker = _NO_SECRETS) -> str | None:
    """The ``stopReason`` as events and results carry it: a known one as it is, another string
    masked, escaped and bounded (:data:`STOP_REASON_CAP`), anything else ``None``."""
    if not isinstance(stop_reason, str):
        return None
    if stop_reason == "cancelled" or stop_reason in _BY_STOP_REASON:
        return stop_reason
    return masker.quote(stop_reason, STOP_REASON_CAP)


def disposition_for_stop_reason(
    stop_reason: Any, *, cancel_requested: bool, masker: Masker = _NO_SECRETS
) -> Disposition:
    """Map a ``stopReason`` value to the turn's ending. An unrecognized one is quoted in the
    message masked with ``masker``, escaped and bounded (a structure by a bounded repr)."""
    if stop_reason == "cancelled":
        return _CANCELLED_AS_ASKED if cancel_requested else _CANCELLED_UNASKED
    known = _BY_STOP_REASON.get(stop_reason) if isinstance(stop_reason, str) else None
    if known is not None:
        return known
    text = stop_reason if isinstance(stop_reason, str) else _REPR.repr(stop_reason)
    shown = masker.quote(text, MESSAGE_CAP)
    message = cap_text(f'agent reported an unrecognized stop reason: "{shown}"')
    return Disposition(TurnFailed, ErrorKind.TURN_OUTCOME_UNKNOWN, message)


# A bounded repr: a structure the agent sent may be huge or nest deeply. Strings inside are kept
# long, so a secret among them is whole when it is masked (the quote is cut after).
_REPR: Final = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxstring = 4096
_REPR.maxother = 200


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
