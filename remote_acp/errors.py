"""The one error vocabulary of remote-acp.

Every failure a caller can meet is a :class:`RemoteAcpError` carrying an :class:`ErrorKind`.
The kind decides the retry class (:data:`RETRYABLE`), so a scheduler never has to parse a
message to know whether trying again can help. Foreign exceptions (``OSError``, anyio's,
pydantic's) are translated where they arise and never reach the caller.
"""

from __future__ import annotations

import enum

__all__ = [
    "RETRYABLE",
    "ErrorKind",
    "RemoteAcpError",
    "retry_backoff_ms",
]


class ErrorKind(enum.StrEnum):
    """Why a session start or a turn did not succeed."""

    AGENT_NOT_FOUND = "agent_not_found"
    """The agent command is empty, or its program (or the local ``ssh``) is not on PATH."""
    INVALID_WORKSPACE_CWD = "invalid_workspace_cwd"
    """The workspace is not a non-empty absolute path to an existing directory."""
    PORT_EXIT = "port_exit"
    """The agent process or its connection was lost (exit, end of stream, ssh failure)."""
    RESPONSE_ERROR = "response_error"
    """The agent answered with a protocol-level error, or the request was refused locally."""
    RESPONSE_TIMEOUT = "response_timeout"
    """A start-up or synchronous call was not answered in time."""
    CREDENTIAL_UNVERIFIED = "credential_unverified"
    """The runtime refused its credential (JSON-RPC ``-32000``)."""
    TURN_CANCELLED = "turn_cancelled"
    """The turn was cancelled by the caller or by the stall bound."""
    TURN_INPUT_REQUIRED = "turn_input_required"
    """The agent asked for something only a person can give."""
    TURN_REFUSED = "turn_refused"
    """The agent refused the prompt (``stopReason: refusal``)."""
    TURN_TOKEN_LIMIT = "turn_token_limit"
    """The agent hit its token limit (``stopReason: max_tokens``)."""
    TURN_REQUEST_LIMIT = "turn_request_limit"
    """The agent hit its request budget for the turn (``stopReason: max_turn_requests``)."""
    TURN_OUTCOME_UNKNOWN = "turn_outcome_unknown"
    """The outcome cannot be known: an unrecognized stop reason or an over-long line."""
    TURN_FAILED = "turn_failed"
    """The agent reported a failure it was not asked to produce."""
    TURN_TIMEOUT = "turn_timeout"
    """The turn ran past ``turn_timeout_ms``."""


RETRYABLE: frozenset[ErrorKind] = frozenset(
    {
        ErrorKind.PORT_EXIT,
        ErrorKind.RESPONSE_ERROR,
        ErrorKind.RESPONSE_TIMEOUT,
        ErrorKind.TURN_FAILED,
        ErrorKind.TURN_TIMEOUT,
        ErrorKind.TURN_REQUEST_LIMIT,
    }
)
"""Kinds for which a fresh attempt can succeed; every other kind is final for its input."""


def retry_backoff_ms(attempt: int, max_retry_backoff_ms: int = 300_000) -> int:
    """Return the wait before retry number ``attempt`` (1-based): ``min(10 s * 2^(attempt-1), cap)``,
    less up to a fifth at random, so many sessions failing together do not retry in lockstep.

    :raises ValueError: if ``attempt`` is below 1.
    """
    if attempt < 1:
        raise ValueError(f"retry attempts count from 1, got {attempt}")
    import random  # here, not at the top: nothing else on the CLI's path needs it (~1 ms at start)

    # Cap the exponent too, so a huge attempt number cannot build a huge integer.
    ceiling = min(10_000 << min(attempt - 1, 40), max_retry_backoff_ms)
    return ceiling - random.randrange(ceiling // 5 + 1)


class RemoteAcpError(Exception):
    """A failure with a kind, a message a person can act on and optional detail.

    ``detail`` carries supporting text, such as the agent's masked standard-error tail; it is
    part of ``str(error)`` so a log line or terminal shows it without extra work.
    """

    def __init__(self, kind: ErrorKind, message: str, *, detail: str = "", retryable: bool | None = None) -> None:
        self.kind = kind
        self.message = message
        self.detail = detail
        self._retryable = retryable
        super().__init__(f"{message}: {detail}" if detail else message)

    @property
    def retryable(self) -> bool:
        """Whether a fresh attempt can succeed: the kind's class (see :data:`RETRYABLE`), unless
        the failure itself says otherwise (a caller's own misuse, a protocol version this client
        cannot speak, input no retry can make valid)."""
        return self.kind in RETRYABLE if self._retryable is None else self._retryable

    def backoff_ms(self, attempt: int, max_retry_backoff_ms: int = 300_000) -> int | None:
        """The wait before retry ``attempt``, or ``None`` when this error is not retryable."""
        return retry_backoff_ms(attempt, max_retry_backoff_ms) if self.retryable else None

    def __repr__(self) -> str:
        return f"RemoteAcpError({self.kind.value!r}, {str(self)!r})"
