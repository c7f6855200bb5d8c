"""The remote rules, in one place: what a launch on another host never gets, and why.

A launch target says whether it is remote (:attr:`~remote_acp.targets.launch.LaunchTarget.remote`);
everything that depends on it reads :func:`rules_for` instead of asking on its own:

- **No tool servers.** MCP servers are configured here, for this machine (their commands, paths
  and credentials); a remote agent gets ``mcpServers: []`` and the capability is a gap.
- **No file system.** ``fs/read_text_file`` and ``fs/write_text_file`` would serve this
  machine's files to an agent whose workspace is on the host: never advertised over ssh.
- **No measurement claim.** A measurement source reads what the runtime writes on the machine
  that ran it, which is not this one.

How ssh's own failures are read (exit 255 and 127 before the agent spoke are ``port_exit``) is the
ssh target's, in :mod:`remote_acp.targets.ssh.errors`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LaunchRules", "rules_for"]


@dataclass(frozen=True, slots=True)
class LaunchRules:
    """What a launch may be given: tool servers, the file-system capabilities, a measurement claim."""

    tool_servers: bool
    file_system: bool
    measurement: bool


_LOCAL = LaunchRules(tool_servers=True, file_system=True, measurement=True)
_REMOTE = LaunchRules(tool_servers=False, file_system=False, measurement=False)


def rules_for(remote: bool) -> LaunchRules:
    """The rules of a launch on this machine (``remote`` false) or on another host."""
    return _REMOTE if remote else _LOCAL
