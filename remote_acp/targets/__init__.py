"""Where an agent runs: the launch-target interface, the local and ssh targets, and the agent
process with its pipes and containment."""

from .launch import LaunchSpec, LaunchTarget, LocalTarget
from .ssh import SshSettings, SshTarget

__all__ = ["LaunchSpec", "LaunchTarget", "LocalTarget", "SshSettings", "SshTarget"]
