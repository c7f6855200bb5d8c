"""The workflow's keys as pydantic models, with the defaults of the behaviour contract.

Three blocks are read: ``agent`` (the runtime and its bounds), ``agent-client-protocol`` (what
this kind adds: tool servers, the environment allow-list, file-system access) and ``worker``
(where it runs). Every other top-level block of a WORKFLOW.md (a scheduler's ``tracker``,
``polling``...) is left to whoever reads it. Values are strict: YAML already types them, so a
quoted ``"5000"`` is a mistake to report, not a number to coerce.

A rule that must say more than pydantic's words raises :class:`PydanticCustomError` whose type
is the finding's stable code (it has a dot; pydantic's own types have none): :mod:`.validate`
turns each error into a finding by its type.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

__all__ = [
    "EFFORT_KEYS",
    "KIND",
    "MAX_REATTACH_WINDOW_S",
    "READ_TIMEOUT_FALLBACK_MS",
    "AcpBlock",
    "AgentBlock",
    "WorkerBlock",
    "WorkflowConfig",
    "type_name",
]

KIND: Final = "agent-client-protocol"
READ_TIMEOUT_FALLBACK_MS: Final = 30_000
"""What a ``read_timeout_ms`` of zero or less means (the contract's fallback)."""
EFFORT_KEYS: Final = ("effort", "reasoning_effort")
"""Keys other kinds read for reasoning effort; accepted in ``agent`` and ``agent-client-protocol``
so that a shared workflow loads, and warned about (``agent.effort.not_forwarded``)."""

_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
MAX_REATTACH_WINDOW_S: Final = 7 * 24 * 3600
"""SshSettings' bound, kept here too: importing the ssh settings would load the session script's
module for every workflow, local ones included (a test keeps the two equal)."""


def type_name(value: object) -> str:
    """How a YAML value's type reads in a message: ``a list``, ``an integer``, ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"  # a date or a timestamp: YAML reads those too


class _Block(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)


def _env_name(name: str) -> str:
    if not _ENV_NAME.match(name):
        # Not quoted back: a value put here by mistake could be a secret.
        raise PydanticCustomError("value.invalid", "is not an environment variable name")
    return name


EnvName = Annotated[str, AfterValidator(_env_name)]
"""A variable name, checked entry by entry (so a finding names the entry's position)."""


class AgentBlock(_Block):
    """The ``agent`` block: which runtime to start and the bounds of its sessions."""

    kind: str = KIND
    command: str | list[str]
    """The runtime with its protocol switch (``qwen --acp``); a list is used word for word."""
    max_turns: int = Field(20, ge=1)
    max_sessions: int = Field(0, ge=0)
    """0: unlimited."""
    max_concurrent_agents: int = Field(10, ge=1)
    max_concurrent_agents_by_state: dict[str, int] = Field(default_factory=dict)
    turn_timeout_ms: int = Field(3_600_000, ge=1)
    read_timeout_ms: int = 5_000
    """Zero or less: :data:`READ_TIMEOUT_FALLBACK_MS`."""
    stall_timeout_ms: int = 300_000
    """Zero or less disables the stall bound."""
    stop_grace_ms: int = Field(5_000, ge=1)
    max_retry_backoff_ms: int = Field(300_000, ge=1)
    max_tokens: int | None = Field(None, ge=1)
    effort: Any = None
    reasoning_effort: Any = None

    @field_validator("kind", mode="before")
    @classmethod
    def _kind(cls, value: Any) -> Any:
        if isinstance(value, str) and value != KIND:
            raise PydanticCustomError(
                "agent.kind.unsupported",
                "is '{found}': remote-acp drives only agents of the kind agent-client-protocol",
                {"found": value},
            )
        return value

    @field_validator("command", mode="before")
    @classmethod
    def _command(cls, value: Any) -> Any:
        if isinstance(value, str):
            if not value.strip():
                raise PydanticCustomError("agent.command.empty", "is empty or whitespace-only")
            return value
        if isinstance(value, list):
            if not value or not all(isinstance(word, str) for word in value):
                raise PydanticCustomError("agent.command.empty", "must be a non-empty list of strings")
            if not value[0].strip():
                raise PydanticCustomError("agent.command.empty", "names no program (its first word is empty)")
            return value
        raise PydanticCustomError(
            "value.wrong_type", "must be a string or a list of strings, got {found}", {"found": type_name(value)}
        )

    @field_validator("max_concurrent_agents_by_state", mode="after")
    @classmethod
    def _lower_states(cls, value: dict[str, int]) -> dict[str, int]:
        for state, limit in value.items():
            if limit < 0:
                raise PydanticCustomError(
                    "value.out_of_range",
                    "the limit of {state!r} must be at least 0, got {limit}",
                    {"state": state, "limit": limit},
                )
        return {state.lower(): limit for state, limit in value.items()}


class AcpBlock(_Block):
    """The ``agent-client-protocol`` block: what only this kind reads."""

    mcp_config: str | None = None
    """Path of an ``{"mcpServers": {...}}`` JSON file, relative to the workflow's directory."""
    env_allowlist: list[EnvName] | None = None
    """Set: a local agent gets only these variables (and a minimal set); unset: the whole environment."""
    fs_read: bool = False
    fs_write: bool = False
    effort: Any = None
    reasoning_effort: Any = None

    @field_validator("mcp_config", mode="before")
    @classmethod
    def _mcp_config(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, str):
            raise PydanticCustomError(
                "agent-client-protocol.mcp_config.wrong_type",
                "must be a string (the path of an MCP servers JSON file), got {found}",
                {"found": type_name(value)},
            )
        if isinstance(value, str) and (not value.strip() or "\0" in value):
            raise PydanticCustomError("value.invalid", "must be a non-empty path")
        return value


class WorkerBlock(_Block):
    """The ``worker`` block: present with ``ssh_hosts``, the agent runs on a host of the fleet."""

    ssh_hosts: list[str] | None = Field(None, min_length=1)
    """Fleet selectors (``@build``, ``build-*``, an inventory host) or ssh destinations; a single
    string is one selector."""
    ssh_pass_env: list[EnvName] = Field(default_factory=list)
    ssh_strict_host_key_checking: Literal["accept-new", "yes", "no"] | None = None
    """``None``: ``accept-new``, unless the ssh_config sets a policy for the host."""
    ssh_reattach_window_s: int | None = Field(None, ge=1)
    """Seconds the host keeps the agent with no ssh link (``SshSettings.reattach_window_s``);
    ``None``: no window. Applies to a run on a host only (a local session has no link to lose)."""

    @field_validator("ssh_hosts", mode="before")
    @classmethod
    def _hosts(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [value]
        if isinstance(value, list) and any(isinstance(h, str) and (not h.strip() or "\0" in h) for h in value):
            raise PydanticCustomError("value.invalid", "names an empty host")
        return value

    @field_validator("ssh_reattach_window_s", mode="after")
    @classmethod
    def _window(cls, value: int | None) -> int | None:
        if value is not None and value > MAX_REATTACH_WINDOW_S:
            raise PydanticCustomError(
                "value.out_of_range",
                "must be at most {limit} (7 days), got {found}",
                {"limit": MAX_REATTACH_WINDOW_S, "found": value},
            )
        return value

    @field_validator("ssh_strict_host_key_checking", mode="before")
    @classmethod
    def _policy(cls, value: Any) -> Any:
        # YAML 1.1 reads a bare yes/no as a boolean: take it as the word the operator wrote.
        if isinstance(value, bool):
            return "yes" if value else "no"
        return value


class WorkflowConfig(BaseModel):
    """The keys remote-acp reads from a workflow file (other top-level blocks are ignored)."""

    model_config = ConfigDict(extra="ignore", strict=True, frozen=True, populate_by_name=True)

    agent: AgentBlock
    acp: AcpBlock = Field(default_factory=AcpBlock, alias=KIND)
    worker: WorkerBlock = Field(default_factory=WorkerBlock)

    @model_validator(mode="before")
    @classmethod
    def _empty_blocks(cls, data: Any) -> Any:
        # ``worker:`` with nothing under it is an empty block, not a null one.
        if isinstance(data, dict):
            return {key: {} if value is None and key in _BLOCKS else value for key, value in data.items()}
        return data


_BLOCKS: Final = frozenset({"agent", KIND, "worker"})
