"""Where a user's agent slots live on a host: the one convention the session script (which takes
a slot) and the probe (which counts them) both follow.

A slot is a file ``slot-N`` in a directory of the user's, locked with ``flock`` while an agent
runs. The directory must be one no other local user can make or fill first: a directory named
after the uid in ``/tmp`` can be created by anyone, who then owns it and makes every placement
there fail. So by default (:data:`PRIVATE`) the slots live

1. in the user's runtime directory, ``$XDG_RUNTIME_DIR/remote-acp-slots``, or
   ``/run/user/UID/remote-acp-slots`` (systemd-logind makes it for every login, the user's own,
   mode 0700, on a tmpfs), when it exists, is a directory and not a link, and is the user's;
2. else in ``~/.cache/remote-acp-slots/HOSTNAME``: in the user's home, which other users cannot
   write, and per host name, because a home may be shared between hosts (NFS) while slots count
   one host's agents.

A slot location given explicitly is a path prefix the user id is appended to (tests, and hosts
that want another place).
"""

from __future__ import annotations

import shlex
from typing import Final

__all__ = ["PRIVATE", "SLOT_DIR_NAME", "slot_dir_lines"]

PRIVATE: Final = "@private"
"""The default slot location (see the module docstring)."""
SLOT_DIR_NAME: Final = "remote-acp-slots"


def slot_dir_lines(location: str, *, out: str, uid: str, scratch: str) -> list[str]:
    """POSIX sh lines that set the variable ``out`` to the slot directory for ``location``
    (:data:`PRIVATE`, or a path prefix), given the variable ``uid`` holding the effective uid.
    ``scratch``: a prefix for the helper variables the lines use (and unset). They create
    nothing: the caller decides whether to make the directory (a session) or only look (a probe).
    """
    if location != PRIVATE:
        return [f"{out}={shlex.quote(location)}${uid}"]
    d, h = f"{scratch}d", f"{scratch}h"
    return [
        f"{out}=",
        f'for {d} in "${{XDG_RUNTIME_DIR-}}" "/run/user/${uid}"; do',
        f"  case ${d} in /*) ;; *) continue ;; esac",
        # A test without -O answers 2: then the home directory, which is surely the user's.
        f'  if [ -d "${d}" ] && [ ! -h "${d}" ] && [ -O "${d}" ] 2>/dev/null; then',
        f"    {out}=${d}/{SLOT_DIR_NAME}; break",
        "  fi",
        "done",
        f'if [ -z "${out}" ]; then',
        f"  {h}=",
        f"  [ -r /proc/sys/kernel/hostname ] && read -r {h} </proc/sys/kernel/hostname",
        f'  [ -n "${h}" ] || {h}=$(uname -n 2>/dev/null) || {h}=',
        f"  case ${h} in ''|.*|*[!A-Za-z0-9._-]*) {h}=host ;; esac",
        f"  {out}=${{HOME-}}/.cache/{SLOT_DIR_NAME}/${h}",
        "fi",
        f"unset {d} {h}",
    ]
