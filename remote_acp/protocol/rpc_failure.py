"""What an agent's JSON-RPC error answer means, in the one error vocabulary: pure, no I/O.

Every call's error reads the same way, at start-up or mid-turn. ``-32000`` is ACP's
"authentication required": the runtime refused its credential, whichever call it answered
(Claude's ACP adapter refuses only at ``session/prompt``), and no retry changes that. Any other
code is the agent's own failure. The error's ``data`` is often the only pointer to the cause
(``-32603 "Internal error"`` with ``details: "Claude Code process exited with code 1"``), so it
is kept as compact JSON in the facts and quoted in the message; what the runtime wrote is masked
before it is escaped and bounded, like everything an agent sends.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

from ..errors import MAX_FACT_CHARS, Cause, ErrorFacts, ErrorKind, RemoteAcpError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..masking import Masker
    from .jsonrpc import RpcErrorBody

__all__ = ["AUTH_REQUIRED", "DATA_TEXT_CAP", "ERROR_TEXT_CAP", "HINT_CAP", "auth_hint", "call_error", "data_text"]

AUTH_REQUIRED: Final = -32000
ERROR_TEXT_CAP: Final = 500
"""How much of the runtime's error message the error quotes (masked, escaped, then cut)."""
DATA_TEXT_CAP: Final = 300
"""How much of the error's ``data`` the message quotes; the facts keep up to
:data:`~remote_acp.errors.MAX_FACT_CHARS`."""
HINT_CAP: Final = 300
"""How much of the agent's own login instructions a credential refusal quotes."""
_START_CALLS: Final = frozenset({"initialize", "session/new"})
_MAX_METHODS: Final = 16  # an agent may list anything in authMethods


def data_text(data: Any) -> str | None:
    """``data`` as compact JSON (``None`` when the error carried none). Not yet masked."""
    if data is None:
        return None
    try:
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):  # it was parsed from JSON; never fail on it
        return repr(data)


def auth_hint(methods: Sequence[Any], masker: Masker) -> str:
    """How the agent says it can be logged in, from ``initialize``'s ``authMethods``: each
    method's ``name: description`` (its id standing in for a missing name; a method with
    neither name nor description says nothing and is left out), joined by ``"; "``, masked,
    escaped and bounded; ``""`` when no method says anything (Claude's adapter lists none)."""
    said: list[str] = []
    for method in methods[:_MAX_METHODS]:
        if not isinstance(method, dict):
            continue
        name, description = _text(method.get("name")), _text(method.get("description"))
        if not name and not description:
            continue
        label = name or _text(method.get("id"))
        said.append(f"{label}: {description}" if label and description else label or description)
    return masker.quote("; ".join(said), HINT_CAP) if said else ""


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def call_error(method: str, error: RpcErrorBody, masker: Masker, *, hint: str = "") -> RemoteAcpError:
    """The error for ``method`` answered with ``error``. ``hint``: the agent's login
    instructions (:func:`auth_hint`), passed on when it refused its credential.

    ``-32000``: ``credential_unverified``, cause ``credential_refused`` (never retryable); any
    other code: ``response_error``, cause ``agent_error``. Both carry the code and the masked,
    bounded ``data`` in their facts.
    """
    text = masker.quote(error.message, ERROR_TEXT_CAP)
    data = data_text(error.data)
    facts = ErrorFacts(rpc_code=error.code, rpc_data=masker.quote(data, MAX_FACT_CHARS) if data else None)
    shown = f"; data: {masker.quote(data, DATA_TEXT_CAP)}" if data else ""
    if error.code == AUTH_REQUIRED:
        where = "" if method in _START_CALLS else f" at {masker.quote(method, 100)}"
        message = f"the agent runtime refused its credential{where}: {text!r}{shown}"
        if hint:
            message += f"; the agent says how to log in: {hint}"
        return RemoteAcpError(ErrorKind.CREDENTIAL_UNVERIFIED, message, cause=Cause.CREDENTIAL_REFUSED, facts=facts)
    return RemoteAcpError(
        ErrorKind.RESPONSE_ERROR,
        f"{masker.quote(method, 100)} error {error.code}: {text}{shown}",
        cause=Cause.AGENT_ERROR,
        facts=facts,
    )
