"""The local ssh argv, a pure function of its inputs (see :mod:`remote_acp.targets.ssh.target`).

A session needs ssh to run one command with its stdio as the protocol's pipes, and nothing else.
A user's ssh_config can make it do otherwise, so the options that would are overridden on the
command line, where they win over any ssh_config (OpenSSH keeps the first value it obtains):

- ``RemoteCommand``: with ours, ssh refuses to start ("Cannot execute command-line and remote
  command"). ``none`` drops theirs.
- ``PermitLocalCommand``: a ``LocalCommand`` runs locally once connected, and its output lands on
  our stdout, in the protocol stream.
- ``StdinNull``: stdin from ``/dev/null``; the agent would never read a request.
- ``SessionType``: ``none`` runs no command, ``subsystem`` runs something else.
- ``ForkAfterAuthentication``: ssh would go to the background, away from our pipes.
- ``ClearAllForwardings``: the user's forwardings would be set up for every session, and two
  sessions binding one local port would fail or warn.
- ``ConnectionAttempts``: retries multiply the connect timeout past the bound of the start; a
  scheduler retries, not ssh.
- ``VisualHostKey``: an ASCII-art fingerprint would fill the standard-error tail.
- ``LogLevel VERBOSE``: ssh's own reasons for a failure (``Timeout, server ... not responding``
  is printed at ``INFO``) and the line that says the login was authenticated, which tells a
  failed connection from a failed login (:mod:`remote_acp.targets.ssh.errors`).

Some of these options are newer than the clients people run (``StdinNull``, ``SessionType`` and
``ForkAfterAuthentication`` came with OpenSSH 8.7, ``RemoteCommand`` with 7.6), and an OpenSSH
refuses an option it does not know. :func:`local_ssh_options` asks the local ssh which of them it
knows (``ssh -G`` parses options without connecting), once per binary: the answer is kept in the
cache directory (:func:`remote_acp.paths.cache_base`, an entry of :mod:`hostinv.keep`, read back
only from a directory this user alone can write) while the binary is the same file (path, size,
time, inode). :func:`ssh_argv` leaves out the others: a client that does not know an option
cannot have it set by a config file either.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import subprocess
import threading
from typing import TYPE_CHECKING, Final

import anyio

from hostinv.keep import read_entry, write_whole

from ...errors import RemoteAcpError
from ...paths import cache_base

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .destination import Destination
    from .settings import SshSettings

__all__ = [
    "ALWAYS_OVERRIDDEN",
    "LOG_LEVEL",
    "PROBED_OVERRIDES",
    "READY_LOGIN_MARGIN_MS",
    "local_ssh_options",
    "ready_bound_ms",
    "session_overrides",
    "ssh_argv",
]

LOG_LEVEL: Final = "VERBOSE"
# Known to every OpenSSH that can run a session at all (accept-new, which the generated config
# uses, needs 7.6).
ALWAYS_OVERRIDDEN: Final = (
    ("PermitLocalCommand", "no"),
    ("ClearAllForwardings", "yes"),
    ("ConnectionAttempts", "1"),
    ("VisualHostKey", "no"),
)
# Sent only when the local ssh knows them (:func:`local_ssh_options`).
PROBED_OVERRIDES: Final = (
    ("RemoteCommand", "none"),
    ("StdinNull", "no"),
    ("SessionType", "default"),
    ("ForkAfterAuthentication", "no"),
)
READY_LOGIN_MARGIN_MS: Final = 5_000
"""The least :func:`ready_bound_ms` allows past the connect timeout, for the key exchange,
authentication and the login shell's start (its dotfiles) on a loaded machine."""
_PROBE_TIMEOUT_S: Final = 5.0
_KEPT_VERSION: Final = 2
"""The version of a kept answer (1 was a bare list, in a file of its own format)."""

_known_options: dict[str, frozenset[str]] = {}
_asking: dict[tuple[str, int], tuple[anyio.Event, list[frozenset[str]]]] = {}
"""Probes under way, per ssh path and thread: their event and, once set, their answer."""


def ssh_argv(
    ssh: str,
    destination: Destination,
    settings: SshSettings,
    remote: str,
    *,
    config: str | None,
    known_options: frozenset[str] | None = None,
) -> list[str]:
    """The local argv. ``config`` is the file given to ``-F``: the generated config
    (:func:`~hostinv.sshopts.fallback_config_text`), which includes the user's own. A
    host-key policy in the settings goes on the command line. ``known_options``: the names in
    :data:`PROBED_OVERRIDES` the local ssh knows (:func:`local_ssh_options`); ``None``: all.
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
        "-o", f"LogLevel={LOG_LEVEL}",
        # No connection sharing: neither a client of the user's ControlMaster nor one ourselves.
        "-o", "ControlMaster=no",
        "-o", "ControlPath=none",
    ]  # fmt: skip
    argv += session_overrides(known_options)
    if settings.host_key_policy in ("yes", "no"):
        # A tightening (yes), or the operator's forced choice (no): on the command line, over any
        # ssh_config. An explicit accept-new is only the fallback (see ssh.ssh_config_file): it
        # must not loosen a config that says yes or ask for the host.
        argv += ["-o", f"StrictHostKeyChecking={settings.host_key_policy}"]
    if destination.port is not None:
        argv += ["-p", str(destination.port)]
    argv += ["--", destination.host, f"exec /bin/sh -c {shlex.quote(remote)}"]
    return argv


def session_overrides(known_options: frozenset[str] | None = None) -> list[str]:
    """The ``-o`` words that keep a user's ssh_config from changing what ssh does to a session
    (see the module docstring), without the probed options the local ssh does not know."""
    words: list[str] = []
    for name, value in ALWAYS_OVERRIDDEN:
        words += ["-o", f"{name}={value}"]
    for name, value in PROBED_OVERRIDES:
        if known_options is None or name in known_options:
            words += ["-o", f"{name}={value}"]
    return words


def ready_bound_ms(settings: SshSettings) -> int:
    """How long a session over ssh may take to say it is ready (``LaunchSpec.ready_timeout_ms``):
    the connect timeout, then as long again, and at least :data:`READY_LOGIN_MARGIN_MS`, for
    what ssh does not bound by it.

    ssh's ``ConnectTimeout`` covers the TCP connect and the server's banner; the key exchange and
    authentication are bounded only by the keepalives (``ServerAliveInterval`` times
    ``ServerAliveCountMax``, 45 s by default), and the login shell not at all.
    """
    connect_ms = settings.connect_timeout_s * 1000
    return connect_ms + max(connect_ms, READY_LOGIN_MARGIN_MS)


async def local_ssh_options(ssh: str, environ: Mapping[str, str]) -> frozenset[str]:
    """The names in :data:`PROBED_OVERRIDES` that the ssh at path ``ssh`` knows, asked once per
    binary (``ssh -G``, which parses its options and connects nowhere, refuses an unknown one):
    the answer is remembered in the process and kept under the cache directory while ``ssh`` is
    the same file. All of them are tried in one run; only when that fails, one run each.

    Sessions starting together share one probe: the others wait for its answer (a scheduler
    starting fifty sessions runs ``ssh -G`` once, not fifty times). A probe that cannot run or
    does not finish in time gives the empty set (only options every client knows go out) to
    everyone who waited for it, and is not remembered, so the next session asks again.
    """
    key = (ssh, threading.get_ident())  # one event loop per thread: never wait on another loop's event
    while True:
        known = _known_options.get(ssh)
        if known is not None:
            return known
        pending = _asking.get(key)
        if pending is None:
            break
        event, answer = pending
        await event.wait()
        if answer:  # else the asker was cancelled before it knew: ask again
            return answer[0]
    event, answer = anyio.Event(), []
    _asking[key] = (event, answer)
    try:
        known = await _ask(ssh, environ)
        answer.append(known)
    finally:
        del _asking[key]
        event.set()
    return known


async def _ask(ssh: str, environ: Mapping[str, str]) -> frozenset[str]:
    kept = _kept_entry(ssh)
    known = _read_kept(kept)
    if known is not None:
        _known_options[ssh] = known
        return known
    try:
        if await _knows(ssh, PROBED_OVERRIDES, environ):
            known = frozenset(name for name, _ in PROBED_OVERRIDES)
        else:
            known = frozenset(
                [name for name, value in PROBED_OVERRIDES if await _knows(ssh, ((name, value),), environ)]
            )
    except (OSError, TimeoutError):
        return frozenset()
    _known_options[ssh] = known
    _keep(kept, known)
    return known


def _kept_entry(ssh: str) -> tuple[str, str] | None:
    """Where the answer for the binary ``ssh`` is kept: the directory and the entry's name, made
    of what identifies the file. ``None`` when there is no such file or no trusted cache."""
    try:
        stat = os.stat(ssh)
        directory = str(cache_base() / "ssh-options")
    except (OSError, RemoteAcpError):  # a cache that cannot be trusted only costs the reuse
        return None
    identity = json.dumps([ssh, stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_dev, PROBED_OVERRIDES])
    return directory, hashlib.sha256(identity.encode("utf-8", "surrogateescape")).hexdigest()[:40]


def _read_kept(entry: tuple[str, str] | None) -> frozenset[str] | None:
    """The kept answer, if it reads as one (anything else is a miss, as is an entry in a directory
    another user could have written: :func:`hostinv.keep.read_entry`)."""
    kept = None if entry is None else read_entry(*entry, _KEPT_VERSION)
    names = None if kept is None else kept.get("options")
    known = {name for name, _ in PROBED_OVERRIDES}
    if not isinstance(names, list) or not all(isinstance(n, str) and n in known for n in names):
        return None
    return frozenset(names)


def _keep(entry: tuple[str, str] | None, known: frozenset[str]) -> None:
    """Keep ``known`` as the entry, whole or not at all; a directory that cannot be written only
    costs the reuse."""
    if entry is None:
        return
    directory, name = entry
    data = json.dumps({"version": _KEPT_VERSION, "files": {}, "options": sorted(known)}).encode()
    with contextlib.suppress(OSError):
        os.makedirs(directory, mode=0o700, exist_ok=True)
        write_whole(os.path.join(directory, name + ".json"), data, prefix=".ssh-options-")


async def _knows(ssh: str, options: tuple[tuple[str, str], ...], environ: Mapping[str, str]) -> bool:
    # -F /dev/null: no config file is read, so nothing in one (a Match exec) runs, and an error in
    # one cannot pass for an unknown option.
    argv = [ssh, "-F", "/dev/null", "-G", "-T"]
    for name, value in options:
        argv += ["-o", f"{name}={value}"]
    argv += ["--", "remote-acp-probe"]
    with anyio.fail_after(_PROBE_TIMEOUT_S):
        done = await anyio.run_process(
            argv, check=False, env=dict(environ), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL
        )
    return done.returncode == 0
