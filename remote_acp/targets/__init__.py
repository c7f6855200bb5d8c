"""Where an agent runs: the launch-target interface, the local and ssh targets, and the agent
process with its pipes and containment.

The names below are imported on first use: the CLI raises its open-file limit
(:mod:`.limits`) before any command runs, which must not load the launch machinery, and a local
session never pays for the ssh target.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .launch import LaunchSpec, LaunchTarget, LocalTarget
    from .ssh.settings import SshSettings
    from .ssh.target import SshTarget

__all__ = ["LaunchSpec", "LaunchTarget", "LocalTarget", "SshSettings", "SshTarget"]

_HOME = {
    **dict.fromkeys(("LaunchSpec", "LaunchTarget", "LocalTarget"), ".launch"),
    "SshSettings": ".ssh.settings",
    "SshTarget": ".ssh.target",
}


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
