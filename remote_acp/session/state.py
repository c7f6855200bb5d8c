"""What one session holds while it runs, shared by the parts that drive it.

Start-up (:mod:`~remote_acp.session.startup`) fills it in; the turn driver
(:mod:`~remote_acp.session.turns`), the oversight task (:mod:`~remote_acp.session.oversight`),
the turn figures (:mod:`~remote_acp.session.figures`) and closing
(:mod:`~remote_acp.session.closing`) read it. Each of those keeps its own state to itself; what
is here is what more than one of them reads, or what the facade
(:class:`~remote_acp.session.core.Session`) shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from ..logs import ContextLogger, get_logger
from ..protocol.normalize import Normalizer
from .capabilities import CapabilityRecord
from .inbox import Inbox
from .turn import TurnBounds

if TYPE_CHECKING:
    from ..measure import Measurement
    from ..options import SessionOptions
    from ..protocol.wire import AgentInfo
    from ..targets.agent_end import AgentEnd
    from ..targets.launch import LaunchTarget
    from .connection import AgentConnection
    from .continuation import Obtained

__all__ = ["SessionInfo", "SessionState"]


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """What the handshake established."""

    session_id: str
    pid: int
    target: str
    workspace: str
    agent_name: str
    agent_version: str
    agent_capabilities: dict[str, Any] = field(default_factory=dict)
    """The ``agentCapabilities`` the handshake advertised, as sent."""
    obtained: Obtained = "new"
    """How the session was obtained: new, loaded, resumed, or fell back (to a new session)."""
    auth_methods: tuple[str, ...] = ()
    """The ids of the ``authMethods`` the handshake listed (the agent may ask to authenticate)."""
    measured: bool = False
    """Whether a confirmed measurement source reads this session's token figures now (never on a
    remote launch; ``False`` again once a source is dropped): unmeasured means "not measured"."""


class SessionState:
    """The session's shared record: its launch, its agent, and what the handshake said."""

    def __init__(self, target: LaunchTarget, workspace: str, options: SessionOptions) -> None:
        self.target = target
        self.workspace = workspace
        self.options = options
        self.read_s = options.read_timeout_ms / 1000
        self.bounds = TurnBounds(
            turn_s=options.turn_timeout_ms / 1000,
            stall_s=options.stall_timeout_ms / 1000,
            read_s=self.read_s,
            turn_ms=options.turn_timeout_ms,
            stall_ms=options.stall_timeout_ms,
        )
        self.grace_s = options.stop_grace_ms / 1000
        """Teardown's graceful window; only ever shortened (``kill``, ``aclose(grace_ms=...)``)."""
        self.log = ContextLogger(get_logger("remote_acp.session"), {"host": target.label, "component": "session"})
        self.capabilities = CapabilityRecord(remote=target.remote)
        self.normalizer = Normalizer()
        self.wake = anyio.Event()
        """Set when something the oversight task acts on changed (see :meth:`poke`)."""
        self.inbox = Inbox(self.normalizer, self.log, self.poke)
        self.process: AgentEnd | None = None
        self.conn: AgentConnection | None = None
        self.agent: AgentInfo | None = None
        """What ``initialize`` said of the agent, once it answered."""
        self.info: SessionInfo | None = None
        self.auth_hint = ""
        """The agent's login instructions, for a credential refused mid-session."""
        self.close_method: str | None = None
        self.secrets: tuple[str, ...] | None = None
        """What this session registered for masking (unregistered at teardown)."""
        self.measurement: Measurement | None = None
        self.closing = False
        """Teardown has begun: no turn can start any more."""

    @property
    def session_id(self) -> str:
        return self.info.session_id if self.info else ""

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def poke(self) -> None:
        """Wake the oversight task: a turn's state changed in a way it acts on."""
        self.wake.set()
