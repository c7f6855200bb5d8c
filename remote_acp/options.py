"""Session options with the defaults of the behaviour contract, shared by the library and the CLI.

A plain frozen dataclass validated on construction: building one must not cost a session's
start-up the import of a validation framework (configuration files, which are read once, are
validated with pydantic and turned into these).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from .protocol.framing import DEFAULT_MAX_LINE_BYTES

if TYPE_CHECKING:
    from .mcp import McpServer

__all__ = ["SessionOptions"]


_NOT_BOUNDS = frozenset({"mcp_config", "mcp_servers", "fs_read", "fs_write"})


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionOptions:
    """Bounds and the agent command of one session. Every wait is bounded and configurable.

    :raises ValueError: when a bound is not a positive integer (``stall_timeout_ms`` may be
        zero or negative, which disables it) or the command is neither a string nor a list.
    """

    command: str | list[str]
    """The agent runtime and its protocol-mode switch, e.g. ``qwen --acp``. A string is split with
    POSIX shell rules on a local launch (a shell fragment over ssh); a list is used as is."""
    read_timeout_ms: int = 5_000
    """Bound of every synchronous wait: session/new, accepting a turn, the answer after
    session/cancel, the end of stream after a failed write."""
    turn_timeout_ms: int = 3_600_000
    """A turn running longer is cancelled and ends ``turn_timeout``."""
    stall_timeout_ms: int = 300_000
    """A turn with no event for this long is cancelled; zero or less disables it."""
    stop_grace_ms: int = 5_000
    """The graceful teardown window, from teardown start."""
    initialize_floor_ms: int = 60_000
    """``initialize`` waits ``max(read_timeout_ms, this)``: some runtimes start slowly."""
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    """Longest line accepted from the agent."""
    max_retry_backoff_ms: int = 300_000
    """Cap of the retry backoff."""
    output_drain_ms: int = 5_000
    """After the agent exits, how long a descendant may keep its stdout open."""
    stderr_tail_bytes: int = 8_192
    """How much of the agent's stderr is kept."""
    mcp_config: str | None = None
    """A JSON file of tool servers (``{"mcpServers": {...}}``), read at session start and delivered
    with ``mcp_servers`` on a local launch; never over ssh (:mod:`remote_acp.session.remote_rules`)."""
    mcp_servers: tuple[McpServer, ...] = ()
    """Tool servers the caller supplies; their names are reserved (``mcp_config`` may not reuse one)."""
    fs_read: bool = False
    """Advertise ``fs.readTextFile`` and serve ``fs/read_text_file`` inside the workspace (local only)."""
    fs_write: bool = False
    """Advertise ``fs.writeTextFile`` and serve ``fs/write_text_file`` inside the workspace (local only)."""

    def __post_init__(self) -> None:
        if not isinstance(self.command, str | list) or (
            isinstance(self.command, list) and not all(isinstance(word, str) for word in self.command)
        ):
            raise ValueError("command must be a string or a list of strings")
        for f in fields(self):
            if f.name in ("command", "stall_timeout_ms") or f.name in _NOT_BOUNDS:
                continue
            value = getattr(self, f.name)
            if type(value) is not int or value <= 0:
                raise ValueError(f"{f.name} must be a positive integer, got {value!r}")
        if not isinstance(self.mcp_servers, tuple):
            raise ValueError("mcp_servers must be a tuple of McpServer")
        if type(self.fs_read) is not bool or type(self.fs_write) is not bool:
            raise ValueError("fs_read and fs_write must be booleans")
        if type(self.stall_timeout_ms) is not int:
            raise ValueError(f"stall_timeout_ms must be an integer, got {self.stall_timeout_ms!r}")

    @property
    def initialize_timeout_ms(self) -> int:
        return max(self.read_timeout_ms, self.initialize_floor_ms)
