"""How ``ssh`` is run (:class:`SshSettings`), apart from the target that runs it.

Its own module so that what only needs the settings (a probe-only ``remote-acp check host``,
a workflow's checks) does not load :mod:`.ssh`: the target, its argv, its error reading and
its start slots. :mod:`.ssh` re-exports both names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from .script import check_count, validate_env_names

__all__ = ["MAX_REATTACH_WINDOW_S", "HostKeyPolicy", "SshSettings"]

HostKeyPolicy = Literal["accept-new", "yes", "no"]

_NUMERIC_SETTINGS: Final = (
    "connect_timeout_s",
    "server_alive_interval_s",
    "server_alive_count_max",
    "kill_grace_s",
    "max_concurrent_starts",
)
_POLICIES: Final = ("accept-new", "yes", "no")
MAX_REATTACH_WINDOW_S: Final = 7 * 24 * 3600
"""The longest reattach window: a week. A host keeps a detached agent, its slot and its output
for that long at most."""


@dataclass(frozen=True, slots=True)
class SshSettings:
    """How ``ssh`` is run. Every field but :attr:`capacity` (an inventory host's) is also a
    ``remote-acp run`` flag."""

    host_key_policy: HostKeyPolicy | None = None
    """``None``: ``accept-new``, unless the ssh_config ssh reads sets a policy for the host, ``ask``
    included (then theirs wins). Set, it goes on the command line and wins over any ssh_config."""
    force_insecure_host_keys: bool = False
    """Required for the ``no`` policy, which connects even when a host key changed."""
    config_file: str | None = None
    """An explicit ssh_config, read instead of ``~/.ssh/config`` and ``/etc/ssh/ssh_config`` (as
    with ``ssh -F``; ``none`` reads no file)."""
    connect_timeout_s: int = 10
    server_alive_interval_s: int = 15
    server_alive_count_max: int = 3
    pass_env: tuple[str, ...] = ()
    """Names of local environment variables carried to the agent over stdin (never on argv)."""
    kill_grace_s: int = 3
    """On the host: how long the agent's tree gets after SIGTERM before SIGKILL."""
    max_concurrent_starts: int = 8
    """How many sessions may be starting (connecting through ``initialize``) on one host at once,
    counted across every target of this process; more wait. Below sshd's default ``MaxStartups``
    (10), with room for other clients."""
    capacity: int | None = None
    """How many agents may run on the host at once, counted on the host itself across every
    controller (lock files, :mod:`remote_acp.targets.ssh.script`): a start finding every slot
    held fails ``port_exit``, retryable, and starts nothing. ``None``: no slot is taken. The
    host needs ``flock`` (util-linux, BusyBox)."""
    reattach_window_s: int | None = None
    """``None``: no window, the agent ends with its ssh link. Set (1 s to a week): the host keeps
    the agent and its slot for that many seconds with no link, and the controller reconnects
    (another process may take the session over with its handle and secret). While detached, the
    agent's output is kept on the host up to 8 MiB not yet acknowledged, beyond which its writes
    block (nothing is lost); input is never applied twice. Past the window with nobody attached,
    the agent's whole tree is ended and the slot freed. A host that ends what a login leaves
    behind refuses it (``no_reattach_window``). A local session has no link to lose and takes no
    window."""

    def __post_init__(self) -> None:
        if self.host_key_policy is not None and self.host_key_policy not in _POLICIES:
            raise ValueError(f"host_key_policy must be one of {', '.join(_POLICIES)}")
        if self.host_key_policy == "no" and not self.force_insecure_host_keys:
            raise ValueError(
                "host key policy 'no' connects even to a host whose key changed; "
                "set force_insecure_host_keys to use it anyway"
            )
        if self.config_file is not None and (not self.config_file or any(c in self.config_file for c in "\r\n\0")):
            raise ValueError("config_file must be a non-empty path without line breaks")
        for what in _NUMERIC_SETTINGS:
            check_count(what, getattr(self, what))
        if self.capacity is not None:
            check_count("capacity", self.capacity)
        if self.reattach_window_s is not None:
            check_count("reattach_window_s", self.reattach_window_s)
            if self.reattach_window_s > MAX_REATTACH_WINDOW_S:
                raise ValueError(
                    f"reattach_window_s must be at most {MAX_REATTACH_WINDOW_S} (7 days), not {self.reattach_window_s}"
                )
        validate_env_names(self.pass_env)
