"""The one error vocabulary of remote-acp.

Every failure a caller can meet is a :class:`RemoteAcpError` carrying an :class:`ErrorKind` (the
seeds' taxonomy, which decides the exit status class), a :class:`~hostinv.causes.Cause` (why,
from one closed vocabulary) and :class:`ErrorFacts` (host, exit status, ssh's reason, the
JSON-RPC error, the hosts a placement tried). Whether a retry can help follows from the cause
(:data:`hostinv.causes.CAUSES`), so a scheduler never parses a message. Foreign exceptions
(``OSError``, anyio's, pydantic's) are translated where they arise and never reach the caller.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import Any

from hostinv.causes import CAUSES, Cause, fix_for

__all__ = [
    "RETRYABLE",
    "Cause",
    "ErrorFacts",
    "ErrorKind",
    "PlacementAttempt",
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
    """The turn was cancelled by the caller (cause ``cancelled``), or ended by the stall bound
    (cause ``stalled``: nobody cancelled it, and a retry can help)."""
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
"""Kinds whose usual causes a fresh attempt can overcome. Informative only: an error's own
:attr:`RemoteAcpError.retryable` follows from its cause."""

DEFAULT_CAUSE: dict[ErrorKind, Cause] = {
    ErrorKind.AGENT_NOT_FOUND: Cause.AGENT_NOT_FOUND,
    ErrorKind.INVALID_WORKSPACE_CWD: Cause.WORKSPACE_INVALID,
    ErrorKind.PORT_EXIT: Cause.AGENT_LOST,
    ErrorKind.RESPONSE_ERROR: Cause.AGENT_ERROR,
    ErrorKind.RESPONSE_TIMEOUT: Cause.NO_ANSWER,
    ErrorKind.CREDENTIAL_UNVERIFIED: Cause.CREDENTIAL_REFUSED,
    ErrorKind.TURN_CANCELLED: Cause.CANCELLED,
    ErrorKind.TURN_INPUT_REQUIRED: Cause.INPUT_REQUIRED,
    ErrorKind.TURN_REFUSED: Cause.REFUSED,
    ErrorKind.TURN_TOKEN_LIMIT: Cause.TOKEN_LIMIT,
    ErrorKind.TURN_REQUEST_LIMIT: Cause.REQUEST_LIMIT,
    ErrorKind.TURN_OUTCOME_UNKNOWN: Cause.OUTCOME_UNKNOWN,
    ErrorKind.TURN_FAILED: Cause.AGENT_REPORTED_FAILURE,
    ErrorKind.TURN_TIMEOUT: Cause.TURN_DEADLINE,
}
"""The cause of an error raised with none: each kind's commonest."""


def retry_backoff_ms(attempt: int, max_retry_backoff_ms: int = 300_000) -> int:
    """Return the wait before retry number ``attempt`` (1-based): ``min(10 s * 2^(attempt-1), cap)``,
    less up to a fifth at random, so many sessions failing together do not retry in lockstep.

    :raises ValueError: if ``attempt`` is below 1.
    """
    if attempt < 1:
        raise ValueError(f"retry attempts count from 1, got {attempt}")
    import random  # here, not at the top: every command loads this module, few retry (~1 ms at start)

    # Cap the exponent too, so a huge attempt number cannot build a huge integer.
    ceiling = min(10_000 << min(attempt - 1, 40), max_retry_backoff_ms)
    return ceiling - random.randrange(ceiling // 5 + 1)


MAX_FACT_CHARS = 2000
"""Longest text fact kept (ssh's reason, a JSON-RPC error's data): the rest is cut, marked."""


def bounded_fact(text: str, limit: int = MAX_FACT_CHARS) -> str:
    """``text`` cut to ``limit`` characters (marked with an ellipsis when cut)."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


@dataclass(frozen=True, slots=True)
class PlacementAttempt:
    """A host a placement tried, and why it could not take the session there."""

    host: str
    destination: str
    kind: ErrorKind
    cause: Cause
    retryable: bool
    message: str

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "destination": self.destination,
            "error_kind": self.kind.value,
            "cause": self.cause.value,
            "retryable": self.retryable,
            "message": self.message,
        }


@dataclass(frozen=True, slots=True)
class ErrorFacts:
    """What is known about a failure besides its kind and cause; every field may be unknown.

    Text fields are masked by whoever set them (they may hold what an agent or a host wrote) and
    bounded (:data:`MAX_FACT_CHARS`). ``rpc_data``: the JSON-RPC error's ``data``, as compact
    JSON. ``agent_name`` and ``agent_version``: what the agent said of itself in ``initialize``,
    when the failure came after it. ``attempts``: for a placement, every host it tried, in order.
    """

    host: str | None = None
    destination: str | None = None
    exit_status: int | None = None
    signal: int | None = None
    ssh_reason: str | None = None
    rpc_code: int | None = None
    rpc_data: str | None = None
    tool: str | None = None
    slot_dir: str | None = None
    known_hosts: str | None = None
    key_name: str | None = None
    ssh_target: str | None = None
    workspace: str | None = None
    bound_ms: int | None = None
    agent_name: str | None = None
    agent_version: str | None = None
    attempts: tuple[PlacementAttempt, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        """The known facts only (``attempts`` as a list of objects)."""
        out: dict[str, Any] = {}
        for name in self.__slots__:
            value = getattr(self, name)
            if name == "attempts":
                if value:
                    out[name] = [a.to_json() for a in value]
            elif value is not None:
                out[name] = value
        return out


class RemoteAcpError(Exception):
    """A failure with a kind, a cause, a message a person can act on, facts and optional detail.

    ``detail`` carries supporting text, such as the agent's masked standard-error tail; it is
    part of ``str(error)`` so a log line or terminal shows it without extra work. ``cause``
    defaults to the kind's commonest (:data:`DEFAULT_CAUSE`).
    """

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        detail: str = "",
        cause: Cause | None = None,
        facts: ErrorFacts | None = None,
    ) -> None:
        self.kind = kind
        self.cause = cause if cause is not None else DEFAULT_CAUSE[kind]
        self.message = message
        self.detail = detail
        self.facts = facts if facts is not None else ErrorFacts()
        super().__init__(f"{message}: {detail}" if detail else message)

    @property
    def retryable(self) -> bool:
        """Whether a fresh attempt can succeed with nothing changed: the cause's
        (:data:`hostinv.causes.CAUSES`)."""
        return CAUSES[self.cause].retryable

    @property
    def fix(self) -> str:
        """What a person does about it (``""`` when nothing but a retry, or nothing at all)."""
        f = self.facts
        return fix_for(
            self.cause,
            destination=f.destination,
            ssh_target=f.ssh_target,
            known_hosts=f.known_hosts,
            key_name=f.key_name,
            workspace=f.workspace,
            tool=f.tool,
            slot_dir=f.slot_dir,
        )

    def backoff_ms(self, attempt: int, max_retry_backoff_ms: int = 300_000) -> int | None:
        """The wait before retry ``attempt``, or ``None`` when this error is not retryable."""
        return retry_backoff_ms(attempt, max_retry_backoff_ms) if self.retryable else None

    def with_facts(self, **changes: Any) -> RemoteAcpError:
        """A copy with ``changes`` made to its facts (the message, kind and cause kept)."""
        error = RemoteAcpError(
            self.kind, self.message, detail=self.detail, cause=self.cause, facts=replace(self.facts, **changes)
        )
        error.__cause__ = self.__cause__
        return error

    def to_json(self) -> dict[str, Any]:
        """``error_kind``, ``cause``, ``retryable``, ``message``, ``fix`` and ``facts``."""
        return {
            "error_kind": self.kind.value,
            "cause": self.cause.value,
            "retryable": self.retryable,
            "message": str(self),
            "fix": self.fix or None,
            "facts": self.facts.to_json(),
        }

    def __repr__(self) -> str:
        return f"RemoteAcpError({self.kind.value!r}, {self.cause.value!r}, {str(self)!r})"
