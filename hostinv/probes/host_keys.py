"""Host keys for probes: the policy a host gets, the decision on a key known_hosts does not hold,
the line ``accept-new`` appends (as ssh writes it), and known_hosts files parsed once per
version rather than at every connection. No asyncssh here: the runner hands in what it needs.

The policy (:func:`effective_policy`) is the stricter of what ssh's configuration says for the
host (``StrictHostKeyChecking`` as ``ssh -G`` reports it) and what the caller asked for: ``yes``
and ``ask`` refuse a key no known_hosts file holds (``ask`` has no one to ask), ``accept-new``
and ``no`` add it. A caller's ``accept-new`` never loosens a configuration's ``yes``, and a
changed key is refused whatever anyone says. A key is written only when the policy allowed it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..sshopts import ResolvedSsh, known_hosts_line

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["HostKeyCheck", "append_line", "effective_policy", "parsed_known_hosts"]

Policy = Literal["accept-new", "yes"]


def effective_policy(configured: str, requested: Policy) -> tuple[Policy, str]:
    """The policy a probe applies to a host and why, from ``configured`` (``StrictHostKeyChecking``
    as :class:`~hostinv.sshopts.ResolvedSsh` reads it: ``yes``, ``ask``, ``accept-new`` or ``no``)
    and ``requested`` (the caller's). The stricter one wins."""
    if configured in ("yes", "ask"):
        return "yes", f"the ssh config sets StrictHostKeyChecking {configured} for it"
    if requested == "yes":
        return "yes", "the host key policy asked for is 'yes'"
    return "accept-new", f"the host key policy is accept-new (StrictHostKeyChecking {configured})"


@dataclass(slots=True)
class HostKeyCheck:
    """The decision on a key known_hosts does not hold for a host, and what was decided.

    ``policy``: what :func:`effective_policy` gave, ``because`` why. ``outcome``: ``None`` until
    asked; ``"added"``, ``"unknown"`` or ``"changed"`` after. ``found_in``: for ``changed``, the
    file holding the other key. ``refusal``: for ``unknown``, why the key was not added."""

    resolved: ResolvedSsh
    policy: Policy
    read_files: tuple[str, ...]
    write_file: str | None
    because: str = ""
    outcome: str | None = None
    found_in: str | None = None
    refusal: str = ""
    added_line: str | None = field(default=None, repr=False)

    def decide(self, addr: str, key_type: str, key_b64: str, holds_key: Callable[[str], bool]) -> bool:
        """Whether to trust a key the files do not hold; ``holds_key(file)``: whether ``file``
        holds any key (or CA) for this host."""
        for path in self.read_files:
            if holds_key(path):
                self.outcome, self.found_in = "changed", path
                return False
        if self.policy != "accept-new":
            self.outcome, self.refusal = "unknown", self.because or f"the host key policy is {self.policy!r}"
            return False
        if self.write_file is None:
            self.outcome, self.refusal = (
                "unknown",
                "ssh keeps no known_hosts file to add it to (UserKnownHostsFile none)",
            )
            return False
        line = known_hosts_line(
            self.resolved.known_hosts_name, key_type, key_b64, hashed=self.resolved.hash_known_hosts
        )
        try:
            append_line(self.write_file, line)
        except OSError as exc:
            self.outcome = "unknown"
            self.refusal = f"it could not be added to {self.write_file} ({exc.strerror or exc})"
            return False
        self.outcome, self.added_line = "added", line
        return True


def append_line(path: str, line: str) -> None:
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        lead = ""
        if size:
            with open(path, "rb") as existing_file:
                existing_file.seek(size - 1)
                lead = "" if existing_file.read(1) == b"\n" else "\n"
        os.write(fd, (lead + line).encode())  # one write with O_APPEND: lines from parallel probes do not mix
    finally:
        os.close(fd)


_KNOWN_HOSTS: dict[tuple[tuple[str, int, int, int], ...], Any] = {}
_KNOWN_HOSTS_KEPT = 8


def parsed_known_hosts(paths: Sequence[str], read: Callable[[list[str]], Any]) -> Any:
    """The known_hosts files at ``paths``, parsed once while they are unchanged.

    asyncssh parses the files it is given at every connection: over a fleet that is every key of
    a known_hosts listing the fleet, once per host (a thousand hosts, a million keys). A file a
    probe appends a key to (``accept-new``) changes size, so the next connection reads it anew.
    ``read``: asyncssh's ``read_known_hosts``."""
    versions = []
    try:
        for path in paths:
            info = os.stat(path)
            versions.append((path, info.st_ino, info.st_size, info.st_mtime_ns))
    except OSError:
        return list(paths)  # asyncssh reads them itself and says what is wrong
    key = tuple(versions)
    parsed = _KNOWN_HOSTS.get(key)
    if parsed is None:
        if len(_KNOWN_HOSTS) >= _KNOWN_HOSTS_KEPT:
            _KNOWN_HOSTS.clear()
        parsed = _KNOWN_HOSTS[key] = read(list(paths))
    return parsed
