"""What the user's ``ssh`` would do for a host, asked of ``ssh`` itself, and known_hosts lines as it writes them.

A probe must mean what ``ssh NAME`` means: the same HostName, Port, User, keys, jump hosts and
known_hosts files, through every ``Host``/``Match`` block, ``Include``, token and the system-wide
config. asyncssh parses a subset of ssh_config (no ``HashKnownHosts``, no system file, and it
reads ``UserKnownHostsFile none`` as "check no key at all"), so the options are resolved by
``ssh -G`` (:func:`ssh_g_argv`, about 10 ms, no connection) and read here (:func:`parse_ssh_g`);
the runner then gives asyncssh every option explicitly and no config file.

Pure, apart from :func:`known_hosts_line`'s random salt: the runner runs the process.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import pwd
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "DEFAULT_PORT",
    "ResolvedSsh",
    "existing",
    "known_hosts_line",
    "known_hosts_name",
    "login_home",
    "parse_jump",
    "parse_ssh_g",
    "probe_ciphers",
    "ssh_g_argv",
]

DEFAULT_PORT: Final = 22


@dataclass(frozen=True, slots=True)
class ResolvedSsh:
    """The options ``ssh -G`` printed for one destination, as the runner needs them."""

    hostname: str
    port: int
    user: str
    identity_files: tuple[str, ...] = ()
    identities_only: bool = False
    user_known_hosts: tuple[str, ...] = ()
    """``UserKnownHostsFile``, ``~`` expanded; the first is where ssh adds a new key."""
    global_known_hosts: tuple[str, ...] = ()
    hash_known_hosts: bool = False
    host_key_alias: str | None = None
    proxy_jump: str | None = None
    proxy_command: str | None = None
    ciphers: tuple[str, ...] = ()
    """``Ciphers``: those the user's ssh would offer, in its order (``()``: ssh printed none)."""

    @property
    def known_hosts_name(self) -> str:
        """The name ssh looks the key up by and writes it under."""
        return known_hosts_name(self.host_key_alias or self.hostname, None if self.host_key_alias else self.port)

    @property
    def known_hosts_files(self) -> tuple[str, ...]:
        """Every file ssh reads keys from, user files first."""
        return self.user_known_hosts + self.global_known_hosts


def ssh_g_argv(
    destination: str,
    *,
    config: str | None,
    port: int | None = None,
    user: str | None = None,
    identity_file: str | None = None,
    options: Mapping[str, str] | None = None,
) -> list[str]:
    """``ssh -G`` for ``destination`` (a name or alias, never starting with ``-``), with the
    host's own fields as the command-line options that override the config, as on ``ssh``'s."""
    argv = ["ssh", "-G"]
    if config is not None:
        argv += ["-F", config]
    if port is not None:
        argv += ["-p", str(port)]
    if user is not None:
        argv += ["-l", user]
    if identity_file is not None:
        argv += ["-i", identity_file]
    for key, value in (options or {}).items():
        argv += ["-o", f"{key}={value}"]
    return [*argv, "--", destination]


def _expand(path: str, home: str) -> str:
    return home + path[1:] if path == "~" or path.startswith("~/") else path


def login_home() -> str:
    """The account's home from the password database, as ssh expands ``~`` (whatever ``$HOME``
    says); ``$HOME`` only for an account the database does not know."""
    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        return os.path.expanduser("~")


def parse_ssh_g(text: str, *, home: str | None = None) -> ResolvedSsh:
    """Read ``ssh -G`` output (``keyword value`` lines, keywords in lower case).

    ``none`` in a file list means no file, as in ssh. ``home`` expands ``~`` (default: the
    account's home from the password database, as ssh expands it, whatever ``$HOME`` says).

    :raises ValueError: when the output lacks a hostname, port or user (not ``ssh -G`` output).
    """
    if home is None:
        home = login_home()
    single: dict[str, str] = {}
    identities: list[str] = []
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if not key or not value:
            continue
        key = key.lower()
        if key == "identityfile":
            identities.append(_expand(value, home))
        else:
            single.setdefault(key, value)
    try:
        hostname, port, user = single["hostname"], int(single["port"]), single["user"]
    except (KeyError, ValueError) as exc:
        raise ValueError(f"not ssh -G output (no {exc})") from None

    def files(key: str) -> tuple[str, ...]:
        return tuple(_expand(p, home) for p in single.get(key, "").split() if p.lower() != "none")

    def opt(key: str) -> str | None:
        value = single.get(key)
        return None if value is None or value.lower() == "none" else value

    return ResolvedSsh(
        hostname=hostname,
        port=port,
        user=user,
        identity_files=tuple(identities),
        identities_only=single.get("identitiesonly", "no").lower() == "yes",
        user_known_hosts=files("userknownhostsfile"),
        global_known_hosts=files("globalknownhostsfile"),
        hash_known_hosts=single.get("hashknownhosts", "no").lower() == "yes",
        host_key_alias=opt("hostkeyalias"),
        proxy_jump=opt("proxyjump"),
        proxy_command=opt("proxycommand"),
        ciphers=tuple(c for c in single.get("ciphers", "").split(",") if c),
    )


def probe_ciphers(allowed: Sequence[str], supported: Sequence[str]) -> list[str]:
    """The ciphers a probe offers: those of ``allowed`` (what the user's ssh would offer) that
    the client ``supported``, AES-GCM first, the rest in their order; ``[]`` when none is left
    (the client's defaults then). asyncssh's chacha20-poly1305, OpenSSH's first choice, builds
    its cipher objects anew for every packet in Python; AES-GCM is one call per packet, in
    hardware on both ends (0.35 s less CPU, client and hosts, for a 50-host check here). The
    user's list still decides which ones may be used at all."""
    usable = [c for c in allowed if c in supported]
    return sorted(usable, key=lambda c: not (c.startswith("aes") and "-gcm@" in c))


def parse_jump(hop: str) -> tuple[str, int | None, str | None]:
    """One ``ProxyJump`` hop (``[user@]host[:port]``, ``[v6]:port`` or ``ssh://[user@]host[:port]``)
    as ``(host, port, user)``."""
    hop = hop.removeprefix("ssh://")
    user, at, rest = hop.rpartition("@")
    host, port = rest, None
    if rest.startswith("["):
        inner, _, tail = rest[1:].partition("]")
        host = inner
        if tail.startswith(":") and tail[1:].isdigit():
            port = int(tail[1:])
    elif rest.count(":") == 1:
        name, _, number = rest.partition(":")
        if number.isdigit():
            host, port = name, int(number)
    return host, port, (user if at else None)


def known_hosts_name(host: str, port: int | None) -> str:
    """``host``, or ``[host]:port`` off port 22, as ssh writes it."""
    return host if port in (None, DEFAULT_PORT) else f"[{host}]:{port}"


def known_hosts_line(name: str, key_type: str, key_b64: str, *, hashed: bool) -> str:
    """One known_hosts line as ssh adds it (no comment), ``name`` hashed as ``HashKnownHosts``
    does: ``|1|`` base64(salt) ``|`` base64(HMAC-SHA1(salt, name)), with a fresh 20-byte salt."""
    if hashed:
        salt = secrets.token_bytes(20)
        digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
        name = f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"
    return f"{name} {key_type} {key_b64}\n"


def existing(paths: Sequence[str]) -> list[str]:
    """The files among ``paths`` that can be read (ssh skips the others silently)."""
    return [p for p in paths if os.path.isfile(p) and os.access(p, os.R_OK)]
