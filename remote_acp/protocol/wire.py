"""The ACP messages this client reads and writes outside the streamed updates, decoded by hand.

Only what the client uses is read; unknown fields, ``_meta`` and vendor extensions are
tolerated everywhere (agents send fields outside the schema). Decoding is a few dict lookups
rather than validation models: a session start should not pay for building schema classes,
and the conformance tests check what we send against the official SDK's models instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "PROTOCOL_VERSION",
    "SESSION_ID_BOUND",
    "AgentInfo",
    "InitializeResult",
    "WireError",
    "initialize_params",
    "load_params",
    "new_session_params",
    "parse_initialize",
    "parse_new_session",
    "prompt_params",
    "resume_params",
]

PROTOCOL_VERSION: Final = 1
SESSION_ID_BOUND: Final = 256
"""The longest session id accepted. Real ids are UUID-sized (36 characters); the id is repeated
in every event and history entry, so an agent must not be able to make it large."""
_CONTROL: Final = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


class WireError(ValueError):
    """A result did not have the shape the protocol gives it."""


@dataclass(frozen=True, slots=True)
class AgentInfo:
    name: str
    version: str
    title: str | None = None


@dataclass(frozen=True, slots=True)
class InitializeResult:
    protocol_version: int
    agent_capabilities: dict[str, Any] = field(default_factory=dict)
    agent_info: AgentInfo | None = None
    auth_methods: list[Any] = field(default_factory=list)

    @property
    def load_session(self) -> bool:
        return self.agent_capabilities.get("loadSession") is True

    def mcp_transport(self, transport: str) -> bool:
        """Whether ``mcpCapabilities.<transport>`` (``http``, ``sse``) is exactly true: absent,
        false or anything else means the agent cannot take tool servers of that transport."""
        caps = self.agent_capabilities.get("mcpCapabilities")
        return isinstance(caps, dict) and caps.get(transport) is True

    def session_capability(self, name: str) -> bool:
        """Whether ``sessionCapabilities.<name>`` is advertised (an object; presence means support)."""
        caps = self.agent_capabilities.get("sessionCapabilities")
        return isinstance(caps, dict) and isinstance(caps.get(name), dict)


def _object(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise WireError(f"{what} is not an object")
    return value


def parse_initialize(raw: Any) -> InitializeResult:
    """Decode an ``initialize`` result.

    :raises WireError: when it is not an object or has no integer ``protocolVersion``.
    """
    result = _object(raw, "the initialize result")
    version = result.get("protocolVersion")
    if type(version) is not int:
        raise WireError("the initialize result has no integer protocolVersion")
    info = result.get("agentInfo")
    agent = None
    if isinstance(info, dict):
        name, ver, title = info.get("name"), info.get("version"), info.get("title")
        agent = AgentInfo(
            name if isinstance(name, str) else "",
            ver if isinstance(ver, str) else "",
            title if isinstance(title, str) else None,
        )
    methods = result.get("authMethods")
    return InitializeResult(
        protocol_version=version,
        agent_capabilities=_object(result.get("agentCapabilities"), "agentCapabilities"),
        agent_info=agent,
        auth_methods=methods if isinstance(methods, list) else [],
    )


def parse_new_session(raw: Any) -> str:
    """The ``sessionId`` of a ``session/new`` result.

    :raises WireError: when there is no non-empty string ``sessionId``, or it is longer than
        :data:`SESSION_ID_BOUND` or holds a control character (the message says which).
    """
    session_id = _object(raw, "the session/new result").get("sessionId")
    if not isinstance(session_id, str) or not session_id:
        raise WireError("the session/new result has no sessionId")
    if len(session_id) > SESSION_ID_BOUND:
        raise WireError(
            f"the agent's session id is {len(session_id)} characters long, over the bound of {SESSION_ID_BOUND}"
        )
    if _CONTROL.search(session_id):
        raise WireError("the agent's session id holds a control character")
    return session_id


def initialize_params(client_version: str, *, fs_read: bool = False, fs_write: bool = False) -> dict[str, Any]:
    """``initialize`` params: pinned version, no terminal, and the file-system capabilities as
    given (both false unless the session serves them: what a launch may have is decided by
    :func:`remote_acp.session.filesystem.file_access`, never here). Always sent explicitly."""
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "clientCapabilities": {"fs": {"readTextFile": fs_read, "writeTextFile": fs_write}, "terminal": False},
        "clientInfo": {"name": "remote-acp", "title": "remote-acp", "version": client_version},
    }


def new_session_params(cwd: str, mcp_servers: list[dict[str, Any]]) -> dict[str, Any]:
    """``session/new`` params; ``mcpServers`` is always sent, ``[]`` when there are none."""
    return {"cwd": cwd, "mcpServers": mcp_servers}


def load_params(session_id: str, cwd: str, mcp_servers: list[dict[str, Any]]) -> dict[str, Any]:
    """``session/load`` params; ``mcpServers`` is required there, ``[]`` when there are none."""
    return {"sessionId": session_id, "cwd": cwd, "mcpServers": mcp_servers}


def resume_params(session_id: str, cwd: str, mcp_servers: list[dict[str, Any]]) -> dict[str, Any]:
    """``session/resume`` params; ``mcpServers`` is optional there and omitted when empty."""
    params: dict[str, Any] = {"sessionId": session_id, "cwd": cwd}
    if mcp_servers:
        params["mcpServers"] = mcp_servers
    return params


def prompt_params(session_id: str, text: str) -> dict[str, Any]:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
