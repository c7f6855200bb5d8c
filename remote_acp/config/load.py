"""Workflow files: reading one, and what a session gets from it.

A workflow is a YAML file, or a WORKFLOW.md (a name ending ``.md``) whose YAML front matter is the
configuration and whose body is the prompt. :func:`load_workflow` runs the check of
:mod:`.validate`, raises :class:`ConfigError` on any error, logs each warning (the same text
``remote-acp validate`` prints) and returns a :class:`Workflow`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..local_files import NotRegularFileError, TooLargeError, read_small_file
from ..logs import get_logger
from ..options import SessionOptions
from ..targets.launch import LocalTarget
from .models import READ_TIMEOUT_FALLBACK_MS, WorkflowConfig
from .validate import Checked, Finding, check_text

if TYPE_CHECKING:
    from ..targets.ssh.settings import SshSettings

__all__ = ["ConfigError", "SchedulingLimits", "Workflow", "check_file", "load_workflow"]

log = get_logger("remote_acp.config")

_MARKDOWN = (".md", ".markdown")


class ConfigError(ValueError):
    """A workflow file with errors. ``findings`` holds every finding (warnings too); the text is
    the errors, one per line, as ``remote-acp validate`` prints them."""

    def __init__(self, checked: Checked) -> None:
        self.findings = checked.findings
        super().__init__("\n".join(f.text for f in checked.errors))


MAX_WORKFLOW_BYTES = 1 << 20
"""A workflow is a page of YAML and a prompt; a larger file is refused unread."""


def check_file(path: str | os.PathLike[str]) -> Checked:
    """The findings of the workflow file at ``path`` (a file that cannot be read is one error)."""
    source = os.fspath(path)
    try:
        # Newlines as text mode reads them (\r\n and \r are \n), so lines count alike.
        text = read_small_file(source, MAX_WORKFLOW_BYTES).decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except (OSError, UnicodeDecodeError) as exc:
        if isinstance(exc, NotRegularFileError):
            why = "not a regular file"
        elif isinstance(exc, TooLargeError):
            why = f"larger than {MAX_WORKFLOW_BYTES} bytes"
        else:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        return Checked(source, None, (Finding("file.unreadable", "error", "", f"cannot be read: {why}", None, source),))
    return check_text(text, source, markdown=source.lower().endswith(_MARKDOWN))


def load_workflow(path: str | os.PathLike[str]) -> Workflow:
    """The workflow at ``path``, checked; its warnings are logged (``remote_acp.config``).

    :raises ConfigError: the file cannot be read or has errors (nothing was started).
    """
    checked = check_file(path)
    if checked.config is None:
        raise ConfigError(checked)
    for finding in checked.warnings:
        log.warning(finding.logged)
    return Workflow(
        path=checked.source,
        config=checked.config,
        prompt=checked.prompt,
        warnings=checked.warnings,
    )


@dataclass(frozen=True, slots=True)
class SchedulingLimits:
    """What a workflow's ``agent`` block says to the scheduler running it: turns per run, sessions
    in all (0: unlimited), agents at once, and agents at once per state of the scheduler's own
    (a lowercased state name to a limit)."""

    max_turns: int
    max_sessions: int
    max_concurrent_agents: int
    max_concurrent_agents_by_state: dict[str, int]


@dataclass(frozen=True, slots=True)
class Workflow:
    """A checked workflow: its keys (:attr:`config`), the prompt of a WORKFLOW.md, and what a session
    is built from. Relative paths in it resolve against :attr:`directory`."""

    path: str
    config: WorkflowConfig
    prompt: str | None
    """A WORKFLOW.md's body, stripped; ``None`` for a YAML file or an empty body."""
    warnings: tuple[Finding, ...] = ()

    @property
    def directory(self) -> str:
        return os.path.dirname(os.path.abspath(self.path))

    @property
    def command(self) -> str | list[str]:
        return self.config.agent.command

    @property
    def ssh_hosts(self) -> tuple[str, ...]:
        """Fleet selectors or ssh destinations; empty: the agent runs on this machine."""
        return tuple(self.config.worker.ssh_hosts or ())

    @property
    def remote(self) -> bool:
        return bool(self.ssh_hosts)

    @property
    def mcp_config(self) -> str | None:
        """The MCP servers file, made absolute against the workflow's directory."""
        given = self.config.acp.mcp_config
        return None if given is None else os.path.join(self.directory, os.path.expanduser(given))

    @property
    def scheduling(self) -> SchedulingLimits:
        """The limits the workflow sets for the scheduler that embeds remote-acp: checked here,
        never applied by a session or by ``remote-acp run`` (they bound a scheduler's queue)."""
        agent = self.config.agent
        return SchedulingLimits(
            max_turns=agent.max_turns,
            max_sessions=agent.max_sessions,
            max_concurrent_agents=agent.max_concurrent_agents,
            max_concurrent_agents_by_state=dict(agent.max_concurrent_agents_by_state),
        )

    def session_options(self, **overrides: Any) -> SessionOptions:
        """The :class:`~remote_acp.options.SessionOptions` of this workflow; an override that is not
        ``None`` wins (``command``, ``read_timeout_ms``...: the flags of ``remote-acp run``)."""
        agent, acp = self.config.agent, self.config.acp
        values: dict[str, Any] = {
            "command": agent.command,
            "read_timeout_ms": agent.read_timeout_ms if agent.read_timeout_ms > 0 else READ_TIMEOUT_FALLBACK_MS,
            "turn_timeout_ms": agent.turn_timeout_ms,
            "stall_timeout_ms": agent.stall_timeout_ms,
            "stop_grace_ms": agent.stop_grace_ms,
            "max_retry_backoff_ms": agent.max_retry_backoff_ms,
            "mcp_config": self.mcp_config,
            "fs_read": acp.fs_read,
            "fs_write": acp.fs_write,
        }
        values.update({key: value for key, value in overrides.items() if value is not None})
        return SessionOptions(**values)

    def ssh_settings(self, **overrides: Any) -> SshSettings:
        """The :class:`~remote_acp.targets.ssh.target.SshSettings` of the ``worker`` block (``no`` as the
        host key policy is the operator's explicit choice, so it is forced); overrides as above."""
        # Here, not at the top: a workflow run on this machine loads none of the ssh target.
        from ..targets.ssh.settings import SshSettings

        worker = self.config.worker
        values: dict[str, Any] = {
            "host_key_policy": worker.ssh_strict_host_key_checking,
            "force_insecure_host_keys": worker.ssh_strict_host_key_checking == "no",
            "pass_env": tuple(worker.ssh_pass_env),
            "reattach_window_s": worker.ssh_reattach_window_s,
        }
        values.update({key: value for key, value in overrides.items() if value is not None})
        return SshSettings(**values)

    def local_target(self) -> LocalTarget:
        """The local launch target, with the environment allow-list when the workflow sets one."""
        allowlist = self.config.acp.env_allowlist
        return LocalTarget(env_allowlist=None if allowlist is None else tuple(allowlist))
