"""The capability record: what this session can deliver, declared before the first turn.

Four entries, in a fixed order, each starting resolved before the handshake and only ever
lowering within the session. ``protocol``: the runtime provides it through the protocol;
``ours``: this client provides it; ``gap``: nobody does. The first turn carries one notice
naming every gap; a lowering after that is logged at warning, so an unfamiliar line in a run
log reads as a declared limit rather than an unreported error.
"""

from __future__ import annotations

import enum
from typing import Final

from ..logs import get_logger
from .remote_rules import rules_for

__all__ = ["Capability", "CapabilityRecord", "CapabilityState"]

log = get_logger("remote_acp.session.capabilities")


class Capability(enum.Enum):
    TOOL_SERVERS = "tool servers"
    TOKEN_COUNTS = "token counts"
    SESSION_CONTINUATION = "session continuation"
    AGENT_VERSION = "agent version"


class CapabilityState(enum.StrEnum):
    PROTOCOL = "protocol"
    OURS = "ours"
    GAP = "gap"


ORDER: Final = tuple(Capability)
NOTICE_PREFIX: Final = "this session started with a declared capability gap in: "


class CapabilityRecord:
    """Per-session record. ``remote``: the launch is on another host, whose rules
    (:func:`~remote_acp.session.remote_rules.rules_for`) withhold tool servers; ``measured``: a
    measurement source confirmed the launch (none exists yet, so token counts start as a gap).
    Tool servers also lower when a transport the agent cannot take is withheld."""

    def __init__(self, *, remote: bool, measured: bool = False) -> None:
        self._states = {
            Capability.TOOL_SERVERS: (
                CapabilityState.PROTOCOL if rules_for(remote).tool_servers else CapabilityState.GAP
            ),
            Capability.TOKEN_COUNTS: CapabilityState.OURS if measured else CapabilityState.GAP,
            Capability.SESSION_CONTINUATION: CapabilityState.PROTOCOL,
            Capability.AGENT_VERSION: CapabilityState.PROTOCOL,
        }
        self._notice_sent = False

    def state(self, capability: Capability) -> CapabilityState:
        return self._states[capability]

    def lower(self, capability: Capability, why: str) -> None:
        """Lower an entry to ``gap`` (never raises one back)."""
        if self._states[capability] is CapabilityState.GAP:
            return
        self._states[capability] = CapabilityState.GAP
        if self._notice_sent:
            log.warning(
                "capability lowered after the once-per-session notice",
                extra={"capability": capability.value, "reason": why},
            )
        else:
            log.debug("capability lowered", extra={"capability": capability.value, "reason": why})

    def gaps(self) -> list[str]:
        return [c.value for c in ORDER if self._states[c] is CapabilityState.GAP]

    def take_notice(self) -> str | None:
        """The first turn's notice naming every gap (``None`` without gaps); only once."""
        if self._notice_sent:
            return None
        self._notice_sent = True
        gaps = self.gaps()
        return NOTICE_PREFIX + ", ".join(gaps) if gaps else None

    def snapshot(self) -> dict[str, str]:
        return {c.value: self._states[c].value for c in ORDER}
