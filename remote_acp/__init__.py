"""remote-acp: drive coding agents that speak the Agent Client Protocol, locally or over SSH.

The public names below are imported on first use (:mod:`hostinv.lazy`, the mechanism both
packages share), so ``import remote_acp`` (and the CLI's ``--version``) stays cheap; the session
machinery loads when a name needs it.
"""

from __future__ import annotations

from ._version import __version__

# Not typing.TYPE_CHECKING: importing typing (with re, enum, collections) would be most of what
# ``import remote_acp`` costs. Type checkers treat this name the same way.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .config import load_workflow
    from .errors import RETRYABLE, ErrorKind, RemoteAcpError, retry_backoff_ms
    from .events import (
        Event,
        LinkLost,
        LinkRestored,
        Malformed,
        Notification,
        OtherMessage,
        SessionStarted,
        TokenLowerBound,
        TokenUsage,
        ToolResult,
        TurnCancelled,
        TurnCompleted,
        TurnEnded,
        TurnFailed,
        TurnInputRequired,
        TurnNotStarted,
        TurnTimedOut,
    )
    from .mcp import McpServer
    from .options import SessionOptions
    from .session import Session, SessionInfo, open_session, start_session
    from .session.capabilities import Capability, CapabilityRecord, CapabilityState
    from .session.continuation import OriginLedger
    from .session.handle import SessionHandle
    from .session.stream import TurnStream
    from .session.takeover import attach_session, start_attached
    from .session.turn import TurnResult
    from .session.verification import CredentialVerdict, verify_credentials
    from .targets import LaunchSpec, LaunchTarget, LocalTarget, SshSettings, SshTarget
    from .targets.limits import raise_open_file_limit
    from .targets.process.containment import close_launcher

__all__ = (
    "Capability",
    "CapabilityRecord",
    "CapabilityState",
    "CredentialVerdict",
    "ErrorKind",
    "Event",
    "LaunchSpec",
    "LaunchTarget",
    "LinkLost",
    "LinkRestored",
    "LocalTarget",
    "Malformed",
    "McpServer",
    "Notification",
    "OriginLedger",
    "OtherMessage",
    "RETRYABLE",
    "RemoteAcpError",
    "Session",
    "SessionHandle",
    "SessionInfo",
    "SessionOptions",
    "SessionStarted",
    "SshSettings",
    "SshTarget",
    "TokenLowerBound",
    "TokenUsage",
    "ToolResult",
    "TurnCancelled",
    "TurnCompleted",
    "TurnEnded",
    "TurnFailed",
    "TurnInputRequired",
    "TurnNotStarted",
    "TurnResult",
    "TurnStream",
    "TurnTimedOut",
    "__version__",
    "attach_session",
    "close_launcher",
    "load_workflow",
    "open_session",
    "raise_open_file_limit",
    "retry_backoff_ms",
    "start_attached",
    "start_session",
    "verify_credentials",
)

_HOME = {
    "RETRYABLE": "errors",
    "ErrorKind": "errors",
    "RemoteAcpError": "errors",
    "retry_backoff_ms": "errors",
    "LaunchSpec": "targets",
    "LaunchTarget": "targets",
    "LocalTarget": "targets",
    "SessionOptions": "options",
    "Session": "session",
    "SessionInfo": "session",
    "TurnStream": "session.stream",
    "SessionHandle": "session.handle",
    "attach_session": "session.takeover",
    "start_attached": "session.takeover",
    "open_session": "session",
    "raise_open_file_limit": "targets.limits",
    "close_launcher": "targets.process.containment",
    "start_session": "session",
    "verify_credentials": "session.verification",
    "load_workflow": "config",
    "McpServer": "mcp",
    "CredentialVerdict": "session.verification",
    "OriginLedger": "session.continuation",
    "Capability": "session.capabilities",
    "CapabilityRecord": "session.capabilities",
    "CapabilityState": "session.capabilities",
    "SshSettings": "targets",
    "SshTarget": "targets",
    "TurnResult": "session.turn",
    **dict.fromkeys(
        (
            "Event",
            "LinkLost",
            "LinkRestored",
            "Malformed",
            "Notification",
            "OtherMessage",
            "SessionStarted",
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
        ),
        "events",
    ),
}


# Defined for the interpreter only: a type checker then sees just the names imported above, so a
# misspelt attribute of the package is an error rather than an ``object``.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        # hostinv's mechanism, imported on the first name asked for and not with the package:
        # importing hostinv sets up its logger, and logging (with re and enum) would cost many
        # times what ``import remote_acp`` does. Every public name's module loads hostinv anyway.
        from hostinv.lazy import export

        return export(__name__, _HOME, globals(), name)

    def __dir__() -> list[str]:
        return sorted(__all__)
