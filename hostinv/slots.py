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

A session (never a probe) makes the directory when it is missing and then insists it is a
directory, not a link, and the user's own (:func:`own_slot_dir_lines`): otherwise it exits
:data:`EXIT_NO_SLOTS` with :data:`SLOTS_MARK`. It takes a slot with :func:`take_slot_lines`, on
descriptor 9, which the session and its agent keep open for the session's whole life; every slot
held, it exits :data:`EXIT_AT_CAPACITY` with :data:`AT_CAPACITY_MARK`. A session kept on the host
by a reattach window keeps its directory beside the slots (``s-ID``), so that one place holds
everything a user's sessions leave on a host.
"""

from __future__ import annotations

import shlex
from typing import Final

__all__ = [
    "AT_CAPACITY_MARK",
    "EXIT_AT_CAPACITY",
    "EXIT_NO_SLOTS",
    "PRIVATE",
    "SLOTS_MARK",
    "SLOT_DIR_NAME",
    "own_slot_dir_lines",
    "slot_dir_lines",
    "take_slot_lines",
]

PRIVATE: Final = "@private"
"""The default slot location (see the module docstring)."""
SLOT_DIR_NAME: Final = "remote-acp-slots"
EXIT_NO_SLOTS: Final = 93
EXIT_AT_CAPACITY: Final = 94
AT_CAPACITY_MARK: Final = "remote-acp: host at capacity: every agent slot is held; slots:"
SLOTS_MARK: Final = "remote-acp: the agent slots directory is not usable (it must be a directory the user owns):"


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


def own_slot_dir_lines(location: str, *, out: str, scratch: str) -> list[str]:
    """POSIX sh lines that set ``out`` to the user's slot directory for ``location``, made when
    missing (mode 0700), or exit :data:`EXIT_NO_SLOTS` with :data:`SLOTS_MARK` when it is not a
    directory the user owns. ``scratch``: a prefix for the helper variables (unset at the end).

    ``ls`` and ``awk`` run only where the shell's ``test`` has no ``-O``; ``id`` only without
    ``/proc``.
    """
    uid, owned = f"{scratch}u", f"{scratch}o"
    k, r, e, x = f"{scratch}k", f"{scratch}r", f"{scratch}e", f"{scratch}x"
    unusable = f"{{ printf '%s %s\\n' {shlex.quote(SLOTS_MARK)} \"${out}\" >&2; exit {EXIT_NO_SLOTS}; }}"
    return [
        # The effective uid, as id -u prints it: the second Uid field of the shell's own status,
        # read without starting a program (every one costs the session's start a few ms).
        f"{uid}=",
        "if [ -r /proc/self/status ]; then",
        f"  while read -r {k} {r} {e} {x}; do",
        f"    case ${k} in Uid:) {uid}=${e}; break ;; esac",
        "  done </proc/self/status",
        "fi",
        f'case ${uid} in ""|*[!0-9]*) {uid}=$(id -u) ;; esac',
        f'case ${uid} in ""|*[!0-9]*) {unusable} ;; esac',
        *slot_dir_lines(location, out=out, uid=uid, scratch=scratch),
        # The home fallback's parents may be missing; the slot directory itself is made private.
        f'[ -d "${out}" ] || {{ mkdir -p -- "${{{out}%/*}}" 2>/dev/null; mkdir -m 700 -- "${out}" 2>/dev/null; }}',
        # Owned by us and no link: nobody else can hold our slots or plant files among them.
        # test -O where the shell's test has it (status 2 where it does not), else ls's owner.
        f'[ -d "${out}" ] && [ ! -h "${out}" ] || {unusable}',
        f'[ -O "${out}" ] 2>/dev/null; {owned}=$?',
        f'[ "${owned}" = 0 ] || {{ [ "${owned}" -gt 1 ] && '
        f'[ "$(ls -ldn -- "${out}" | awk \'{{ print $3 }}\')" = "${uid}" ]; }} || {unusable}',
        f"unset {uid} {owned} {k} {r} {e} {x}",
    ]


def take_slot_lines(
    capacity: int, *, directory: str, counter: str, refuse: str = f"exit {EXIT_AT_CAPACITY}"
) -> list[str]:
    """POSIX sh lines that lock a free one of the first ``capacity`` slots in the directory the
    variable ``directory`` names, on descriptor 9, or print :data:`AT_CAPACITY_MARK` on stderr
    and run ``refuse``. ``counter``: the variable the lines count in (unset at the end).

    ``exec 9>>`` creates the file if needed and never truncates; a failing ``exec`` redirection
    ends a non-interactive shell, which is the right outcome in a directory we cannot write.

    :raises ValueError: a capacity that is not an integer of at least 1.
    """
    if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1:
        raise ValueError("capacity must be an integer of at least 1")
    return [
        f"{counter}=0",
        "while :; do",
        f"  {counter}=$(({counter} + 1))",
        f'  if [ "${counter}" -gt {capacity} ]; then',
        f"    printf '%s %s\\n' {shlex.quote(AT_CAPACITY_MARK)} {capacity} >&2; {refuse}",
        "  fi",
        f'  exec 9>>"${directory}/slot-${counter}"',
        "  flock -n 9 && break",
        "  exec 9>&-",
        "done",
        f"unset {counter}",
    ]
