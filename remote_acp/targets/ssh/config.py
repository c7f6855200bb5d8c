"""Host-key policy through ssh configuration: our default as a fallback the user's settings beat.

See :mod:`remote_acp.targets.ssh.target` ("Host keys") for why the default travels in a generated config file.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from typing import TYPE_CHECKING, Final

import anyio

from hostinv import resolve_cache
from hostinv.keep import write_whole

from ...errors import ErrorKind, RemoteAcpError
from ...paths import CACHE_DIR_VARIABLE, cache_base

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from .destination import Destination

__all__ = [
    "effective_host_key_policy",
    "fallback_config_dir",
    "ssh_g_cache_dir",
    "write_fallback_config",
]

# How `ssh -G` spells StrictHostKeyChecking values, read back as the policy names we use.
_SSH_G_SPELLING: Final = {"true": "yes", "false": "no", "off": "no"}


def fallback_config_dir() -> Path:
    """Where generated ssh_configs are kept: ``$REMOTE_ACP_CACHE_DIR/ssh``, else the platformdirs
    user cache directory's ``ssh``."""
    return cache_base() / "ssh"


def ssh_g_cache_dir() -> Path:
    """Where ``ssh -G``'s answers are kept (:mod:`hostinv.resolve_cache`), for sessions and probes
    alike: ``ssh-g`` in the cache directory."""
    return cache_base() / "ssh-g"


def write_fallback_config(text: str, directory: Path) -> Path:
    """The file holding ``text`` in ``directory``, named by its content and written once, atomically.

    An existing file is used only when it holds exactly ``text``; the directory must be ours and
    writable by nobody else (ssh would run what a config file says).

    :raises RemoteAcpError: ``agent_not_found`` when the directory cannot be used.
    """
    data = os.fsencode(text)
    path = directory / f"config-{hashlib.sha256(data).hexdigest()[:32]}"
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = directory.stat()
        if info.st_uid != os.geteuid() or info.st_mode & 0o022:
            raise RemoteAcpError(
                ErrorKind.AGENT_NOT_FOUND,
                f"the directory {directory} is not private to this user: remote-acp keeps ssh configs there "
                f"(set {CACHE_DIR_VARIABLE} to another directory)",
            )
        try:
            if path.read_bytes() == data:
                return path
        except FileNotFoundError:
            pass
        write_whole(path, data, prefix=".config-")
    except OSError as exc:
        raise RemoteAcpError(
            ErrorKind.AGENT_NOT_FOUND,
            f"cannot write an ssh config under {directory}: {exc.strerror or exc} "
            f"(set {CACHE_DIR_VARIABLE} to a writable directory)",
        ) from None
    return path


async def effective_host_key_policy(
    ssh: str,
    destination: Destination,
    config: str | None,
    environ: Mapping[str, str],
    *,
    cache: str | None = None,
) -> str | None:
    """The StrictHostKeyChecking value ssh would use for this host with ``-F config``, as one of
    ``accept-new``, ``yes``, ``no`` or ``ask``; ``None`` when ``ssh -G`` cannot tell.

    ``ssh -G`` prints the effective configuration without connecting, spelling ``yes`` as ``true``
    and ``no`` or ``off`` as ``false``. It cannot tell a value set explicitly from OpenSSH's default
    (``ask``), which is why our default travels as a fallback in the config file instead
    (:func:`hostinv.sshopts.fallback_config_text`): with that file, ``ask`` means the user's configuration set it.
    ``cache``: a directory where the answer is kept while what ssh read is unchanged
    (:mod:`hostinv.resolve_cache`, shared with the probes).
    """
    argv = [ssh, *(["-F", config] if config is not None else []), "-G"]
    if destination.port is not None:
        argv += ["-p", str(destination.port)]
    argv += ["--", destination.host]
    answer = name = None
    if cache is not None:
        name = resolve_cache.entry_name(argv, ssh, environ=environ)
        answer = resolve_cache.lookup(cache, name, environ)
    if answer is None:
        started = time.time_ns()
        try:
            with anyio.fail_after(5):
                done = await anyio.run_process(
                    argv if name is None else resolve_cache.verbose(argv),
                    check=False,
                    env=dict(environ),
                    stdin=subprocess.DEVNULL,
                )
        except (OSError, TimeoutError):
            return None
        if done.returncode != 0:
            return None  # ssh itself will report the problem, with its own words, on connect
        answer = done.stdout.decode(errors="replace")
        if cache is not None and name is not None:
            said = done.stderr.decode(errors="replace")
            resolve_cache.store_answer(
                cache, name, answer, stderr=said, config=config, environ=environ, since_ns=started
            )
    for line in answer.splitlines():
        key, _, value = line.partition(" ")
        if key == "stricthostkeychecking":
            value = value.strip().lower()
            return _SSH_G_SPELLING.get(value, value) or None
    return None
