"""How an unattended run answers what the agent asks of the client: pure decisions, no I/O.

Nobody is there to approve anything. A permission request is refused with the first refusing
option the agent offers; with none to pick, it is answered ``cancelled`` and the turn ends as
needing a person. A question for the user (``elicitation/create``) ends the turn the same way.
File-system and terminal requests were not advertised, so they are protocol violations: they
get ``-32601`` and a malformed event while the turn goes on. Anything else gets ``-32601``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from .disposition import choose_refusal

__all__ = ["GatingNotice", "Reply", "answer_agent_request"]

CANCELLED_OUTCOME: Final = {"outcome": {"outcome": "cancelled"}}
REFUSED_NOTICE: Final = "refused a permission request because this run is unattended and no one can approve it"
NO_REFUSAL_NOTICE: Final = "the agent needs a permission this unattended run cannot grant"
ELICITATION_NOTICE: Final = (
    "the agent asked for something only a person could give, and this unattended run has no one to "
    "give it: an answer to a question"
)
NOT_IMPLEMENTED: Final = "the agent called a method this client does not implement"
GATED_TOOLS_NOTICE: Final = (
    "a tool server was delivered to this session, but a tool that asks for permission cannot be "
    "called in an unattended run: its requests are refused"
)


@dataclass(frozen=True, slots=True)
class Reply:
    """What to answer and what to tell the caller."""

    result: Any = None
    """The JSON-RPC result, when ``error`` is ``None``."""
    error: str | None = None
    """A ``-32601`` error message, instead of a result."""
    notice: str | None = None
    """A notification for the caller."""
    malformed: str | None = None
    """The detail of a malformed event for the caller (the request violated the protocol)."""
    needs_person: str | None = None
    """What only a person could give: the turn ends ``turn_input_required``."""
    refused: bool = False
    """A permission request was refused (tools gated this way cannot be called)."""


def answer_agent_request(method: str, params: Any, *, winding_down: bool) -> Reply:
    """Decide the answer to one agent request. ``winding_down``: the turn is already ending."""
    if method == "session/request_permission":
        if winding_down:
            return Reply(result=CANCELLED_OUTCOME)
        option = choose_refusal(params)
        if option is None:
            return Reply(
                result=CANCELLED_OUTCOME,
                notice=NO_REFUSAL_NOTICE,
                needs_person="a permission with no refusing option",
            )
        return Reply(
            result={"outcome": {"outcome": "selected", "optionId": option}}, notice=REFUSED_NOTICE, refused=True
        )
    if method == "elicitation/create":
        return Reply(error="method not found", notice=ELICITATION_NOTICE, needs_person="an answer to a question")
    if method.startswith(("fs/", "terminal/")):
        return Reply(error="method not found", malformed=method)
    return Reply(error="method not found")


class GatingNotice:
    """Once per session: when a tool server was delivered and a refusal happens, say that tools
    gated by permission requests cannot be called (a notice for the caller, a warning in the log)."""

    def __init__(self, tool_servers_delivered: int) -> None:
        self._delivered = tool_servers_delivered
        self._told = False

    def on_refusal(self) -> str | None:
        if self._delivered < 1 or self._told:
            return None
        self._told = True
        return GATED_TOOLS_NOTICE
