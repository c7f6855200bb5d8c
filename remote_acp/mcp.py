"""Tool servers (MCP) delivered to a local agent: the server model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["McpServer"]

Transport = Literal["stdio", "http", "sse"]


@dataclass(frozen=True, slots=True)
class McpServer:
    """One tool server. ``stdio``: ``command`` with ``args`` and ``env``; ``http``/``sse``: ``url``
    with ``headers``. ``env`` and ``headers`` hold secrets: never logged, never on a command line."""

    name: str
    transport: Transport = "stdio"
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
