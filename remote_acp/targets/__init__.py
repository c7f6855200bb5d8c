"""Where an agent runs: the launch-target interface, the local and ssh targets, and the agent
process with its pipes and containment.

The ssh target is imported on first use, so a local session never pays for it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .launch import LaunchSpec, LaunchTarget, LocalTarget

if TYPE_CHECKING:
    from .ssh import SshSettings, SshTarget

__all__ = ["LaunchSpec", "LaunchTarget", "LocalTarget", "SshSettings", "SshTarget"]


def __getattr__(name: str) -> Any:
    if name in ("SshSettings", "SshTarget"):
        value = getattr(importlib.import_module(".ssh", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
