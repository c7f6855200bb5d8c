"""Host keys for probes: the policy a host gets, the decision on a key known_hosts does not hold,
the line ``accept-new`` appends (as ssh writes it), and known_hosts files parsed once per
version rather than at every connection. No asyncssh here: the runner hands in what it needs.
A check's *outcome* (:attr:`HostKeyCheck.outcome`) is what it found of the key, not a verdict:
:func:`~hostinv.probes.judge_connect_error` turns a refused one into a verdict.

The policy (:func:`effective_policy`) is the stricter of what ssh's configuration says for the
host (``StrictHostKeyChecking`` as ``ssh -G`` reports it) and what the caller asked for: ``yes``
and ``ask`` refuse a key no known_hosts file holds (``ask`` has no one to ask), ``accept-new``
and ``no`` add it. A caller's ``accept-new`` never loosens a configuration's ``yes``, and a
changed key is refused whatever anyone says. A key is written only when the policy allowed it.

Two things ssh consults besides the known_hosts files hold here too, failing closed. A key
``RevokedHostKeys`` lists (:class:`RevokedKeys`) is refused, known or not, as ssh refuses it; a
file the probe cannot check keys against (missing, unreadable, a line ssh could not read, or a
binary KRL) refuses every key. And a host whose key ssh also verifies through
``KnownHostsCommand`` or DNS (``VerifyHostKeyDNS``), which the probe does not run, gets no key
written and no key trusted but those the known_hosts files hold: the one the command or DNS
would vouch for may be another, and a key written here would be trusted by ssh from then on.
"""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

from ..causes import Cause
from ..sshopts import ResolvedSsh, known_hosts_line

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = [
    "HostKeyCheck",
    "RevokedKeys",
    "append_line",
    "effective_policy",
    "merge_revoked",
    "parsed_known_hosts",
    "read_revoked_keys",
]

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

    ``policy``: what :func:`effective_policy` gave, ``because`` why. ``revoked``: the keys
    ``RevokedHostKeys`` lists, when it is set. ``outcome``: ``None`` until asked; ``"added"``,
    ``"unknown"``, ``"changed"``, ``"revoked"`` or ``"unverifiable"`` (no key can be checked
    against ``RevokedHostKeys``; :attr:`RevokedKeys.problem` says why) after. ``found_in``: for
    ``changed``, the file holding the other key; for ``revoked``, the file listing the key.
    ``refusal``: for ``unknown``, why the key was not added."""

    resolved: ResolvedSsh
    policy: Policy
    read_files: tuple[str, ...]
    write_file: str | None
    because: str = ""
    revoked: RevokedKeys | None = None
    outcome: str | None = None
    found_in: str | None = None
    refusal: str = ""
    added_line: str | None = field(default=None, repr=False)

    def decide(self, addr: str, key_type: str, key_b64: str, holds_key: Callable[[str], bool]) -> bool:
        """Whether to trust a key the files do not hold (or one they hold that ``RevokedHostKeys``
        lists: the connection does not trust those itself); ``holds_key(file)``: whether ``file``
        holds any key (or CA) for this host."""
        if self.refuses(key_b64):
            return False
        for path in self.read_files:
            if holds_key(path):
                self.outcome, self.found_in = "changed", path
                return False
        sources = self.resolved.unchecked_key_sources
        if sources:
            self.outcome = "unknown"
            self.refusal = (
                f"ssh verifies this host's key through {' and '.join(sources)} as well, which the probe does "
                "not consult: it trusts only keys the known_hosts files hold, and adds none "
                "(`check host` with its handshake, through OpenSSH, checks the key as ssh does)"
            )
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

    def refuses(self, key_b64: str) -> bool:
        """Whether ``RevokedHostKeys`` refuses the key (``key_b64``: its public blob, or a host
        CA's), as ssh refuses it: listed there, or a file no key can be checked against. Records
        the outcome."""
        revoked = self.revoked
        if revoked is None:
            return False
        if revoked.problem:
            self.outcome = "unverifiable"
            return True
        if revoked.lists(key_b64):
            self.outcome, self.found_in = "revoked", revoked.path
            return True
        return False


KRL_MAGIC: Final = b"SSHKRL\n\0"
REVOKED_KEPT_BYTES: Final = 16 * 2**20
"""The largest ``RevokedHostKeys`` file read; a larger one refuses every key."""


@dataclass(frozen=True, slots=True)
class RevokedKeys:
    """The keys a ``RevokedHostKeys`` file lists, as public key blobs (a certificate's listed as
    the key it certifies, as ssh compares them). ``problem``: why no key can be checked against
    the file (``""``: they can); ``cause``: what a refusal for that problem is."""

    path: str
    blobs: frozenset[bytes] = frozenset()
    problem: str = ""
    cause: Cause = Cause.SSH_CONFIG_INVALID
    opened: bool = True
    """Whether the file could be opened (``problem`` says why not)."""

    def lists(self, key_b64: str) -> bool:
        try:
            return base64.b64decode(key_b64, validate=True) in self.blobs
        except (binascii.Error, ValueError):
            return True  # a key that cannot be compared is not trusted


def read_revoked_keys(path: str, plain_blob: Callable[[str], bytes]) -> RevokedKeys:
    """The keys the ``RevokedHostKeys`` file at ``path`` lists: a public key a line, as ssh reads
    them (leading blanks, ``#`` comments and empty lines skipped); ``plain_blob(line)``: the public
    blob of the key a line holds (a certificate's key), raising ``ValueError`` for a line that
    holds none.

    ssh refuses every host key when the file cannot be read or a line is not a key, and so does
    a probe (``problem`` set). A binary KRL, which ssh reads too, cannot be checked here: every
    key is refused with a ``problem`` that says so (cause ``host_key_unknown``)."""
    try:
        with open(path, "rb") as file:
            data = file.read(REVOKED_KEPT_BYTES + 1)
    except OSError as exc:
        return RevokedKeys(
            path, problem=f"ssh's RevokedHostKeys file {path} cannot be read ({exc.strerror or exc})", opened=False
        )
    if data.startswith(KRL_MAGIC):
        return RevokedKeys(
            path,
            problem=f"ssh's RevokedHostKeys file {path} is a binary KRL, which the probe cannot check keys against "
            "(`check host` with its handshake, through OpenSSH, checks the key as ssh does)",
            cause=Cause.HOST_KEY_UNKNOWN,
        )
    if len(data) > REVOKED_KEPT_BYTES:
        return RevokedKeys(
            path, problem=f"ssh's RevokedHostKeys file {path} is larger than {REVOKED_KEPT_BYTES // 2**20} MiB"
        )
    blobs = set()
    for number, raw in enumerate(data.split(b"\n"), 1):
        line = raw.decode("utf-8", "replace").lstrip(" \t").rstrip("\r")
        if not line or line.startswith("#"):
            continue
        try:
            blobs.add(plain_blob(line))
        except ValueError:
            return RevokedKeys(path, problem=f"line {number} of ssh's RevokedHostKeys file {path} is not a public key")
    return RevokedKeys(path, frozenset(blobs))


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


def merge_revoked(readings: Sequence[RevokedKeys]) -> RevokedKeys:
    """One reading of the files a ``RevokedHostKeys`` value may name (ssh versions differ on
    whether ``~``, ``%`` tokens and ``${VAR}`` in it are expanded): every key any file that could
    be opened lists, failing closed when one of those cannot be checked or none could be opened."""
    opened = [reading for reading in readings if reading.opened]
    if not opened:
        return readings[0]
    for reading in opened:
        if reading.problem:
            return reading
    return RevokedKeys(
        " or ".join(reading.path for reading in opened), frozenset().union(*(reading.blobs for reading in opened))
    )


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
