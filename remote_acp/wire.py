"""Lean models of the ACP messages this client reads and writes outside the hot path.

Only what the client uses is modelled; unknown fields, ``_meta`` and vendor extensions are
tolerated everywhere (agents send fields outside the schema). Streamed updates are not modelled
here: the normalizer reads them straight from the parsed dict.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "PROTOCOL_VERSION",
    "AgentCapabilities",
    "AgentInfo",
    "InitializeResult",
    "NewSessionResult",
    "SessionCapabilities",
    "initialize_params",
    "prompt_params",
]

PROTOCOL_VERSION: Final = 1


class _Tolerant(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=True)


class AgentInfo(_Tolerant):
    name: str = ""
    title: str | None = None
    version: str = ""


class SessionCapabilities(_Tolerant):
    """Each entry is an object whose presence means support."""

    resume: dict[str, Any] | None = None
    close: dict[str, Any] | None = None
    delete: dict[str, Any] | None = None
    list_: dict[str, Any] | None = Field(None, alias="list")


class AgentCapabilities(_Tolerant):
    load_session: bool = Field(False, alias="loadSession")
    session_capabilities: SessionCapabilities = Field(default_factory=SessionCapabilities, alias="sessionCapabilities")
    mcp_capabilities: dict[str, Any] = Field(default_factory=dict, alias="mcpCapabilities")
    prompt_capabilities: dict[str, Any] = Field(default_factory=dict, alias="promptCapabilities")


class InitializeResult(_Tolerant):
    protocol_version: int = Field(alias="protocolVersion")
    agent_capabilities: AgentCapabilities = Field(default_factory=AgentCapabilities, alias="agentCapabilities")
    auth_methods: list[Any] = Field(default_factory=list, alias="authMethods")
    agent_info: AgentInfo | None = Field(None, alias="agentInfo")


class NewSessionResult(_Tolerant):
    session_id: str = Field(alias="sessionId", min_length=1)


def initialize_params(client_version: str) -> dict[str, Any]:
    """``initialize`` params: pinned version, and no fs or terminal capability (sent explicitly)."""
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
        "clientInfo": {"name": "remote-acp", "title": "remote-acp", "version": client_version},
    }


def prompt_params(session_id: str, text: str) -> dict[str, Any]:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
