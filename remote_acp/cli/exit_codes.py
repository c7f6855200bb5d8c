"""Exit statuses of ``remote-acp``, one per class of failure (documented in docs/operators.md).

The class follows from the error's kind, except where its cause says the kind misleads
(:data:`EXIT_BY_CAUSE`: a stalled turn is the seeds' ``turn_cancelled``, yet retryable).

Besides the error classes of the library's kinds: 1 an unexpected internal error (a bug: the
message names it, ``--log-level debug`` logs the traceback), 2 a usage error, 10 the command's
own local I/O failed (its output could not be written, or the saved session history could not be
read), 130 interrupted, 141 whoever read the output went away (a closed pipe, as ``| head``).
"""

from __future__ import annotations

from typing import Final

from hostinv.causes import CAUSES, Cause

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_BY_CAUSE",
    "EXIT_BY_KIND",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_LOCAL_IO",
    "EXIT_OK",
    "EXIT_USAGE",
    "exit_code_for",
]

EXIT_OK: Final = 0
EXIT_INTERNAL: Final = 1
EXIT_USAGE: Final = 2
EXIT_LOCAL_IO: Final = 10
EXIT_INTERRUPTED: Final = 130
EXIT_BROKEN_PIPE: Final = 141

EXIT_BY_KIND: Final[dict[str, int]] = {
    # 3: the launch itself is misconfigured (fix the command, the workspace or the host); also a
    # connection or protocol failure whose cause no retry can mend (see exit_code_for)
    "agent_not_found": 3,
    "invalid_workspace_cwd": 3,
    # 4: the runtime refused its credential
    "credential_unverified": 4,
    # 5: the connection or protocol failed (retryable)
    "port_exit": 5,
    "response_error": 5,
    "response_timeout": 5,
    # 6: the turn failed in a way a retry can fix
    "turn_failed": 6,
    "turn_timeout": 6,
    "turn_request_limit": 6,
    # 7: the turn ended for good (refusal, token limit, unknown outcome)
    "turn_refused": 7,
    "turn_token_limit": 7,
    "turn_outcome_unknown": 7,
    # 8: the turn was cancelled (by the caller, an interrupt or a closing session)
    "turn_cancelled": 8,
    # 9: the agent needs a person
    "turn_input_required": 9,
}


EXIT_BY_CAUSE: Final[dict[tuple[str, str], int]] = {
    # The stall bound ends a turn as the seeds' turn_cancelled, but nobody cancelled it: the
    # agent went silent, and a retry can succeed (6), where a cancel (8) is a decision to stop.
    ("turn_cancelled", "stalled"): 6,
}
"""Where a cause moves a kind to another class: ``(kind, cause)`` to exit status."""


def exit_code_for(kind: str | None, cause: str | None = None) -> int:
    """The exit status of a run that ended with ``kind`` (``None``: it succeeded) and ``cause``
    (the error's :class:`~remote_acp.errors.Cause` value; ``None`` when not known, which maps by
    the kind alone)."""
    if kind is None:
        return EXIT_OK
    if cause is not None and (by_cause := EXIT_BY_CAUSE.get((kind, cause))) is not None:
        return by_cause
    code = EXIT_BY_KIND.get(kind, EXIT_INTERNAL)
    if code == _EXIT_RETRYABLE_START and cause is not None and not _retryable(cause):
        # A connection or protocol failure no retry can mend (a changed host key, an agent not
        # on the host, a protocol version it cannot speak): 5 promises a retry can help, so it
        # is 3, the class of a launch to fix, and a scheduler that retries on 5 stops.
        return EXIT_BY_KIND["agent_not_found"]
    return code


_EXIT_RETRYABLE_START: Final = 5


def _retryable(cause: str) -> bool:
    try:
        return CAUSES[Cause(cause)].retryable
    except ValueError:  # a cause this version does not know: the kind decides
        return True
