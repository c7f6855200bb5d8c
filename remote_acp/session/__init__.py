"""The ACP session: the turn machine, the driver that pumps it, handshake, continuation,
capabilities, credential verification and teardown."""

from .core import Session, SessionInfo, open_session, start_session

__all__ = ["Session", "SessionInfo", "open_session", "start_session"]
