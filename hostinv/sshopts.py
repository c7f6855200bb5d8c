"""What the user's ``ssh`` would do for a host, asked of ``ssh`` itself, and known_hosts lines as it writes them.

A probe must mean what ``ssh NAME`` means: the same HostName, Port, User, keys, jump hosts and
known_hosts files, through every ``Host``/``Match`` block, ``Include``, token and the system-wide
config. asyncssh parses a subset of ssh_config (no ``HashKnownHosts``, no system file, and it
reads ``UserKnownHostsFile none`` as "check no key at all"), so the options are resolved by
``ssh -G`` (:func:`ssh_g_argv`, about 10 ms, no connection) and read here (:func:`parse_ssh_g`);
the runner then gives asyncssh every option explicitly and no config file.

The ssh_configs generated to include what ssh reads are written here too, for ``ssh -G`` as for
the sessions' own ``ssh`` (:func:`fallback_config_text`, :func:`host_block_text`), so that a
probe and a session read a host's configuration through the same text.

Pure, apart from :func:`known_hosts_line`'s random salt: the runner runs the process.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import pwd
import re
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from .ssh_keywords import config_word

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "DEFAULT_PORT",
    "HOST_KEY_FALLBACK",
    "SYSTEM_CONFIG",
    "ResolvedSsh",
    "existing",
    "expand_proxy_command",
    "expand_revoked_path",
    "fallback_config_text",
    "host_block_text",
    "included_files",
    "known_hosts_line",
    "known_hosts_name",
    "login_home",
    "parse_jump",
    "parse_ssh_g",
    "probe_ciphers",
    "ssh_g_argv",
]

DEFAULT_PORT: Final = 22
SYSTEM_CONFIG: Final = "/etc/ssh/ssh_config"
HOST_KEY_FALLBACK: Final = "accept-new"
"""The host-key policy for a host whose configuration sets none (see :func:`fallback_config_text`)."""
# How ssh -G spells StrictHostKeyChecking, read back as the policy names ssh_config takes.
_POLICY_SPELLING: Final = {"true": "yes", "false": "no", "off": "no"}
# VerifyHostKeyDNS as ssh -G spells it; any other word reads "yes", so a key is never trusted
# that ssh would check through DNS.
_DNS_SPELLING: Final = {"false": "no", "no": "no", "ask": "ask", "true": "yes", "yes": "yes"}


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
    host_key_policy: str = "ask"
    """``StrictHostKeyChecking`` as ssh would apply it: ``yes``, ``ask``, ``accept-new`` or ``no``.
    ``ask`` is also ssh's default when nothing sets it; resolved through
    :func:`fallback_config_text`, a host nothing sets it for reads ``accept-new``."""
    canonicalize: bool = False
    """Whether ssh canonicalizes the name (``CanonicalizeHostname`` yes or always): the answer
    then depends on DNS."""
    known_hosts_command: str | None = None
    """``KnownHostsCommand``: a command ssh runs for more keys to trust (the probe runs none)."""
    revoked_host_keys: str | None = None
    """``RevokedHostKeys`` as ``ssh -G`` prints it: as written (later OpenSSH releases expand
    ``~``, ``%`` tokens and ``${VAR}`` in it when they open it: :func:`expand_revoked_path`)."""
    verify_host_key_dns: str = "no"
    """``VerifyHostKeyDNS``: ``yes``, ``ask`` or ``no``; ssh looks keys up as SSHFP records unless ``no``."""
    original: str = ""
    """The name ssh was given (``%n``), as ``ssh -G`` prints it (``host``)."""

    @property
    def unchecked_key_sources(self) -> tuple[str, ...]:
        """The sources beyond the known_hosts files ssh verifies this host's key through, which
        a probe cannot consult: ``KnownHostsCommand`` and DNS (``VerifyHostKeyDNS``)."""
        sources = ("KnownHostsCommand",) if self.known_hosts_command else ()
        return sources + (("DNS (VerifyHostKeyDNS)",) if self.verify_host_key_dns != "no" else ())

    @property
    def known_hosts_name(self) -> str:
        """The name ssh looks the key up by and writes it under."""
        return known_hosts_name(self.host_key_alias or self.hostname, None if self.host_key_alias else self.port)


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
        host_key_policy=_policy(single.get("stricthostkeychecking", "ask")),
        canonicalize=single.get("canonicalizehostname", "false").lower() not in ("false", "no"),
        known_hosts_command=opt("knownhostscommand"),
        revoked_host_keys=opt("revokedhostkeys"),
        verify_host_key_dns=_DNS_SPELLING.get(single.get("verifyhostkeydns", "no").lower(), "yes"),
        original=single.get("host", ""),
    )


def _policy(value: str) -> str:
    value = value.strip().lower()
    return _POLICY_SPELLING.get(value, value) or "ask"


def included_files(config: str | None, *, home: str) -> list[str]:
    """What ssh reads for ``-F config``: that file made absolute (an ``Include`` of a relative
    path would read it under ``~/.ssh``), nothing for ``none``; with no ``-F``, the account's
    ``HOME/.ssh/config`` then :data:`SYSTEM_CONFIG`. ssh looks for them whether or not they exist."""
    if config is None:
        return [os.path.join(home, ".ssh", "config"), SYSTEM_CONFIG]
    return [] if config.lower() == "none" else [os.path.abspath(config)]


def fallback_config_text(
    config: str | None,
    *,
    home: str,
    by: str,
    share_connections: bool = True,
    host_key_fallback: bool = True,
) -> str:
    """An ssh_config for ``ssh -F`` (or ``ssh -G -F``) that means what ssh's own reading means,
    and tells a host whose configuration sets no ``StrictHostKeyChecking`` from one that sets ``ask``.

    ``ssh -G`` prints ``ask`` both for a host the configuration says ``ask`` for and for one it
    says nothing about (ssh's default), and the two must be told apart: ``ask`` refuses an
    unknown key when no one can answer, while a host with no setting gets our default,
    :data:`HOST_KEY_FALLBACK`. So the file includes what ssh reads (:func:`included_files`:
    ``config`` as ``ssh -F`` reads it, ``home`` the account's home, where ssh finds
    ``~/.ssh/config`` whatever ``$HOME`` says), then, with ``host_key_fallback``, sets
    ``StrictHostKeyChecking accept-new`` for every host. ssh keeps the first value it obtains,
    so any value the included files set for the host wins, and ``ask`` read back means the
    configuration said ``ask``. Without ``share_connections``, ``ControlMaster no`` and
    ``ControlPath none`` come before the Includes, so nothing included can turn sharing back on.
    A file that does not exist is skipped, as ssh skips it. Paths are quoted so that Include
    reads exactly that file (it would expand globs). ``by`` names who wrote it, in its first line.

    :raises ValueError: a path with a line break, which no ssh_config line can hold.
    """
    if not share_connections:
        what = "no connection sharing, the ssh_config ssh would read, then our defaults"
    elif host_key_fallback:
        what = "the ssh_config ssh would read, then the host-key policy for hosts it sets none for"
    else:
        what = "the ssh_config ssh would read"
    lines = [f"# Written by {by}: {what}."]
    if not share_connections:
        # Before everything, so they win for every host, the hops a ProxyJump runs included
        # (their ssh reads this file, not our command line).
        lines += ["ControlMaster no", "ControlPath none"]
    lines += [f"Include {config_word(path)}" for path in included_files(config, home=home)]
    if host_key_fallback:
        lines += ["Host *", f"  StrictHostKeyChecking {HOST_KEY_FALLBACK}"]
    return "\n".join(lines) + "\n"


def host_block_text(address: str, options: Sequence[tuple[str, str]], included: Sequence[str], *, by: str) -> str:
    """An ssh_config holding ``options`` (keyword, value as ssh_config text) for ``address``, then
    ``included`` (see :func:`included_files`) for every host; ``by`` names who wrote it, in its first line.

    :raises ValueError: an address or path with a line break, which no ssh_config line can hold.
    """
    lines = [
        f"# Written by {by}: one host's ssh settings, then the ssh_config ssh would read.",
        f"Host {config_word(address)}",
        # A value is ssh_config text, written as the operator wrote it: OpenSSH takes some values
        # raw to the end of the line (ProxyJump, ProxyCommand), so quoting would change them.
        *(f"  {key} {value}" for key, value in options),
        "Match all",
        *(f"Include {config_word(path)}" for path in included),
    ]
    return "\n".join(lines) + "\n"


_TOKEN: Final = re.compile(r"%(.?)", re.DOTALL)


def expand_proxy_command(command: str, *, hostname: str, port: int, user: str, original: str) -> list[str]:
    """The argv that runs ``ProxyCommand`` as ssh runs it: ``exec`` and the command, its tokens
    expanded (``%h`` the host name, ``%p`` the port, ``%r`` the user, ``%n`` the name as given,
    ``%%`` a ``%``), by ``$SHELL -c`` (``/bin/sh`` when unset). ssh substitutes the values as
    they are, unquoted, and so does this.

    :raises ValueError: an unknown token, as ssh refuses it.
    """
    values = {"h": hostname, "p": str(port), "r": user, "n": original, "%": "%"}

    def one(match: re.Match[str]) -> str:
        token = match.group(1)
        if token not in values:
            raise ValueError(f"ProxyCommand: unknown token %{token}" if token else "ProxyCommand: a lone % at its end")
        return values[token]

    shell = os.environ.get("SHELL") or "/bin/sh"
    return [shell, "-c", "exec " + _TOKEN.sub(one, command)]


_CLIENT_TOKEN: Final = re.compile(r"%(.?)|\$\{([^}]*)\}|\$\{", re.DOTALL)


def expand_revoked_path(
    path: str,
    resolved: ResolvedSsh,
    *,
    home: str,
    local_user: str,
    uid: int,
    local_host: str,
    environ: Mapping[str, str],
) -> str:
    """``RevokedHostKeys`` as OpenSSH releases after 9.2 open it (9.2 opens it as written): a
    leading ``~`` the account's ``home``, then the tokens they expand in it (``%%``, ``%C``,
    ``%d``, ``%h``, ``%i``, ``%j``, ``%k``, ``%L``, ``%l``, ``%n``, ``%p``, ``%r``, ``%u``) and
    ``${VAR}`` from ``environ``. ``local_host``: this machine's name (``gethostname``).

    :raises ValueError: a token ssh refuses, an unset variable, or (``%C``/``%j`` behind a
        ProxyJump) a value only ssh knows; the caller then checks no key against the file.
    """
    if path == "~" or path.startswith("~/"):
        path = home + path[1:]
    elif path.startswith("~"):
        raise ValueError(f"another account's home ({path.split('/', 1)[0]}) is not expanded here")
    jump = resolved.proxy_jump
    port = str(resolved.port)
    values = {
        "%": "%",
        "d": home,
        "h": resolved.hostname,
        "i": str(uid),
        "k": resolved.host_key_alias or resolved.original or resolved.hostname,
        "L": local_host.split(".", 1)[0],
        "l": local_host,
        "n": resolved.original or resolved.hostname,
        "p": port,
        "r": resolved.user,
        "u": local_user,
    }
    if not jump:
        values["j"] = ""
        values["C"] = hashlib.sha1((local_host + resolved.hostname + port + resolved.user).encode()).hexdigest()

    def one(match: re.Match[str]) -> str:
        token, variable = match.group(1), match.group(2)
        if token is not None:
            if token not in values:
                raise ValueError(f"the token %{token} is not one the probe can expand here")
            return values[token]
        if variable is None:
            raise ValueError("an unterminated ${")
        if variable not in environ:
            raise ValueError(f"the environment variable {variable} is not set")
        return environ[variable]

    return _CLIENT_TOKEN.sub(one, path)


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
