"""A session's handle: what another process needs to take a detached session over.

A session with a reattach window (:attr:`~remote_acp.targets.ssh.settings.SshSettings.reattach_window_s`)
has one from its start (:attr:`remote_acp.Session.handle`): the host, the relay's id for the
session there and a secret that proves ownership (the host keeps only its hash), the ACP session,
and the prompt in flight, if any, so a new controller can take the turn over where it stands.
Whoever holds the handle can attach, so it is kept like a credential: the CLI's session history,
where ``remote-acp attach`` finds it, is private to the user.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Final

__all__ = ["SessionHandle"]

_RELAY_ID: Final = re.compile(r"[A-Za-z0-9]{1,64}\Z")
_SECRET: Final = re.compile(r"[!-~]{16,256}\Z")
_TEXT_MAX: Final = 4096


@dataclass(frozen=True, slots=True)
class SessionHandle:
    """A detachable session, as another process takes it over (see the module docstring)."""

    host: str
    """The ssh destination the session runs on, as given to its target."""
    relay_id: str
    """The session's name on the host (letters and digits)."""
    secret: str = field(repr=False)
    session_id: str
    """The ACP session id."""
    workspace: str
    window_s: int
    agent: str = ""
    """The agent's name and version, as its handshake said (for people)."""
    close_method: str | None = None
    """How the session is ended through the protocol (``session/close``), when the agent said."""
    prompt_id: int | None = None
    """The id of the ``session/prompt`` in flight, whose answer a new controller waits for."""
    config_file: str | None = None
    """The ssh_config the session was started with, read again to reach its host."""
    detached_at: float | None = None
    """When the session was last detached (seconds since the epoch); ``None`` while attached."""

    def __post_init__(self) -> None:
        if not _RELAY_ID.match(self.relay_id):
            raise ValueError("a session handle's relay id is 1 to 64 ASCII letters and digits")
        if not _SECRET.match(self.secret):
            raise ValueError("a session handle's secret is one word of 16 to 256 printable ASCII characters")
        if self.config_file is not None and (not isinstance(self.config_file, str) or "\0" in self.config_file):
            raise ValueError("a session handle's ssh config is a path")
        for name in ("host", "session_id", "workspace", "agent"):
            value = getattr(self, name)
            if not isinstance(value, str) or len(value) > _TEXT_MAX or "\0" in value:
                raise ValueError(f"a session handle's {name} must be text of at most {_TEXT_MAX} characters")
        if not self.host or not self.session_id or not self.workspace.startswith("/"):
            raise ValueError("a session handle names a host, a session and an absolute workspace")
        if not isinstance(self.window_s, int) or isinstance(self.window_s, bool) or self.window_s < 1:
            raise ValueError("a session handle's window is a whole number of seconds, at least 1")
        if self.prompt_id is not None and (type(self.prompt_id) is not int or self.prompt_id < 0):
            raise ValueError("a session handle's prompt id is a non-negative integer")
        if self.close_method not in (None, "session/close", "session/delete"):
            raise ValueError("a session handle's close method is session/close or session/delete")

    def detached(self, *, at: float | None = None) -> SessionHandle:
        """This handle, marked detached now (or ``at``)."""
        return replace(self, detached_at=time.time() if at is None else at)

    def seconds_left(self, *, now: float | None = None) -> float | None:
        """How long the host keeps the session from now, when detached (``None`` while attached);
        below zero once the window is over."""
        if self.detached_at is None:
            return None
        return self.detached_at + self.window_s - (time.time() if now is None else now)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> SessionHandle:
        """A handle read back (a file, the session history): untrusted until checked.

        :raises ValueError: anything that is not a whole, valid handle.
        """
        if not isinstance(data, dict):
            raise ValueError("a session handle is a JSON object")
        names = {f.name for f in fields(cls)}
        known = {k: v for k, v in data.items() if k in names}
        if isinstance(known.get("detached_at"), int) and not isinstance(known["detached_at"], bool):
            known["detached_at"] = float(known["detached_at"])
        if known.get("detached_at") is not None and not isinstance(known["detached_at"], float):
            raise ValueError("a session handle's detach time is a number")
        try:
            return cls(**known)
        except TypeError as exc:
            raise ValueError(f"a session handle lacks a field: {exc}") from None
