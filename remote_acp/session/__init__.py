"""The ACP session: the turn machine, the driver that pumps it, handshake, continuation,
capabilities, credential verification and teardown.

Its names load on first use (:mod:`hostinv.lazy`): a listing that reads only a session's handle
(:mod:`.handle`) does not load the session machinery and its event loop.
"""

from typing import TYPE_CHECKING

from hostinv.lazy import lazy_exports

if TYPE_CHECKING:
    from .core import Session, SessionInfo, open_session, start_session

__all__ = ["Session", "SessionInfo", "open_session", "start_session"]

__getattr__, __dir__ = lazy_exports(__name__, dict.fromkeys(__all__, "core"), globals())
