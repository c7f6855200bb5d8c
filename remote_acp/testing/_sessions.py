"""The scripted agent's sessions, and their state directory (so a later process can load them)."""

from __future__ import annotations

import json
import os

from remote_acp.testing._process import TYPE_CHECKING, write_text

if TYPE_CHECKING:
    from remote_acp.testing._wire import Json


class AgentSession:
    """One session as the scripted agent keeps it: its directory, its turns and its tool servers."""

    __slots__ = ("cwd", "history", "mcp_servers", "session_id")

    def __init__(
        self,
        session_id: str,
        cwd: str,
        history: list[tuple[str, str, str]] | None = None,
        mcp_servers: list[Json] | None = None,
    ) -> None:
        self.session_id = session_id
        self.cwd = cwd
        self.history = history or []  # (prompt, reply, messageId)
        self.mcp_servers = mcp_servers or []  # as the latest new/load/resume sent them


def _state_file(state_dir: str | None, session_id: str) -> str | None:
    if not state_dir or "/" in session_id or session_id.startswith("."):
        return None
    return os.path.join(state_dir, f"{session_id}.json")


def save_session(state_dir: str | None, session: AgentSession) -> None:
    path = _state_file(state_dir, session.session_id)
    if path is not None:
        history = [list(entry) for entry in session.history]
        write_text(path, json.dumps({"cwd": session.cwd, "history": history}))


def restore_session(state_dir: str | None, session_id: str) -> AgentSession | None:
    path = _state_file(state_dir, session_id)
    if path is None or not os.path.exists(path):
        return None
    with open(path) as f:
        saved = json.load(f)
    return AgentSession(session_id, saved["cwd"], [tuple(entry) for entry in saved["history"]])
