"""Where remote-acp keeps things on this machine, and the check that only this user could have
written them.

Two roots: the cache (``$REMOTE_ACP_CACHE_DIR``, else platformdirs' user cache directory) holds
what can be made again (generated ssh_configs, ``ssh -G``'s answers, probes, merged inventories);
the state (``$REMOTE_ACP_STATE_DIR``, else platformdirs' user state directory) holds the session
history. What the caches hold steers what runs (an ``ssh -G`` answer names a ProxyCommand, a
generated config is given to ``ssh -F``), so a root is used only while it is this user's own and
writable by no one else, the directories above it too (:func:`hostinv.keep.untrusted`); else
:func:`checked` refuses it with the reason and the fix. Each kind of thing kept has its directory
under :func:`cache_base`, the checked cache root; an entry there is written and read back through
:mod:`hostinv.keep`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import platformdirs

from hostinv.keep import untrusted

from .errors import Cause, ErrorKind, RemoteAcpError

__all__ = ["CACHE_DIR_VARIABLE", "STATE_DIR_VARIABLE", "cache_base", "cache_root", "checked", "state_root"]

CACHE_DIR_VARIABLE: Final = "REMOTE_ACP_CACHE_DIR"
STATE_DIR_VARIABLE: Final = "REMOTE_ACP_STATE_DIR"


def cache_root() -> Path:
    """``$REMOTE_ACP_CACHE_DIR``, else the platformdirs user cache directory of remote-acp
    (unchecked: see :func:`checked`)."""
    override = os.environ.get(CACHE_DIR_VARIABLE)
    if override:
        return Path(override)
    return platformdirs.user_cache_path("remote-acp")


def state_root() -> Path:
    """``$REMOTE_ACP_STATE_DIR``, else the platformdirs user state directory of remote-acp."""
    override = os.environ.get(STATE_DIR_VARIABLE)
    if override:
        return Path(override)
    return platformdirs.user_state_path("remote-acp")


def checked(directory: Path, *, variable: str = CACHE_DIR_VARIABLE) -> Path:
    """``directory``, once it is known that only this user can have written it.

    :raises RemoteAcpError: ``agent_not_found`` with the cause ``config_invalid``, naming the
        directory, why, and ``variable`` (the setting that moves it).
    """
    why = untrusted(directory)
    if why is not None:
        raise RemoteAcpError(
            ErrorKind.AGENT_NOT_FOUND,
            f"remote-acp will not use {directory}: {why}; what it keeps there steers what ssh runs. "
            f"Make it private (chmod go-w, owned by you) or set {variable} to a directory of your own",
            cause=Cause.CONFIG_INVALID,
        )
    return directory


def cache_base() -> Path:
    """The cache root (:func:`cache_root`), once it is known only this user can have written it.

    :raises RemoteAcpError: as :func:`checked` does.
    """
    return checked(cache_root())
