"""Host keys for probes: the decision on a key known_hosts does not hold, the line ``accept-new``
appends (as ssh writes it), the exact ``ssh-keygen -R`` fix for a changed key, and known_hosts
files parsed once per version rather than at every connection. No asyncssh here: the runner
hands in what it needs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..sshopts import ResolvedSsh, known_hosts_line

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["HostKeyCheck", "append_line", "parsed_known_hosts"]


@dataclass(slots=True)
class HostKeyCheck:
    """The decision on a key known_hosts does not hold for a host, and what was decided.

    ``outcome``: ``None`` until asked; ``"added"``, ``"unknown"`` or ``"changed"`` after.
    ``found_in``: for ``changed``, the file holding the other key."""

    resolved: ResolvedSsh
    policy: Literal["accept-new", "yes"]
    read_files: tuple[str, ...]
    write_file: str | None
    outcome: str | None = None
    found_in: str | None = None
    added_line: str | None = field(default=None, repr=False)

    def decide(self, addr: str, key_type: str, key_b64: str, holds_key: Callable[[str], bool]) -> bool:
        """Whether to trust a key the files do not hold; ``holds_key(file)``: whether ``file``
        holds any key (or CA) for this host."""
        for path in self.read_files:
            if holds_key(path):
                self.outcome, self.found_in = "changed", path
                return False
        if self.policy != "accept-new" or self.write_file is None:
            self.outcome = "unknown"
            return False
        line = known_hosts_line(
            self.resolved.known_hosts_name, key_type, key_b64, hashed=self.resolved.hash_known_hosts
        )
        try:
            append_line(self.write_file, line)
        except OSError:
            self.outcome = "unknown"
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
