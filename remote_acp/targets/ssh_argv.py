"""The local ssh argv, a pure function of its inputs (see :mod:`remote_acp.targets.ssh`)."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .ssh import Destination, SshSettings

__all__ = ["ssh_argv"]


def ssh_argv(
    ssh: str, destination: Destination, settings: SshSettings, remote: str, *, config: str | None
) -> list[str]:
    """The local argv. ``config`` is the file given to ``-F``: the generated config
    (:func:`fallback_config_text`), which includes the user's own. A host-key policy in the
    settings goes on the command line.
    """
    argv = [ssh]
    if config is not None:
        argv += ["-F", config]
    argv += [
        "-T",
        "-e", "none",
        "-x",
        "-a",
        "-o", "BatchMode=yes",
        "-o", f"ConnectTimeout={settings.connect_timeout_s}",
        "-o", f"ServerAliveInterval={settings.server_alive_interval_s}",
        "-o", f"ServerAliveCountMax={settings.server_alive_count_max}",
        "-o", "LogLevel=ERROR",
        # No connection sharing: neither a client of the user's ControlMaster nor one ourselves.
        "-o", "ControlMaster=no",
        "-o", "ControlPath=none",
    ]  # fmt: skip
    if settings.host_key_policy is not None:
        argv += ["-o", f"StrictHostKeyChecking={settings.host_key_policy}"]
    if destination.port is not None:
        argv += ["-p", str(destination.port)]
    argv += ["--", destination.host, f"exec sh -c {shlex.quote(remote)}"]
    return argv
