"""The start of a reattachable session: what the first connection runs after the go-ahead.

Run as ``sh -c TEXT ra-start AGENT ARGS...`` (or, inside the session script, as its last part,
the agent's words in ``"$@"``), it refuses a host that ends what a login leaves behind (the host
check of :mod:`.host_check`, given the sessions' directory, when asked for: exit
:data:`EXIT_NO_WINDOW`, with :data:`~.host_check.NO_WINDOW_MARK` on stderr); reads one line from
stdin, ``ID SECRET``; then, with ``umask 077``: takes a slot when asked for one (``flock`` on
descriptor 9 as the session script does, :func:`hostinv.slots.take_slot_lines`: exit
:data:`~hostinv.slots.EXIT_AT_CAPACITY` when every slot is held); makes the session directory
``BASE/s-ID`` (mode 0700; BASE is the user's private slot directory, see :mod:`hostinv.slots`);
stores the secret's sha256 (``printf`` is a builtin, so the secret is never in an argv or an
environment; without ``sha256sum`` the secret itself, 0600 in a 0700 directory); makes the FIFOs
and the first segments; starts the relay (:mod:`.holder`) detached with ``setsid`` where there is
one, under ``/bin/sh`` by default; and then is the session's first attachment (:mod:`.attach`),
at offsets 0 and 0, with no secret to check.

The relay gets descriptor 9 (the slot, whether this step or the session script took it) and
keeps it until the agent ends or the window expires; the start step closes its own copy before
it attaches, so the connection holds no slot. The agent gets the login's PATH (``_ra_path`` when
the session script saved it, else this step's) and umask, not the step's ``077``.
"""

from __future__ import annotations

import shlex
from typing import Final

from hostinv.slots import EXIT_AT_CAPACITY, EXIT_NO_SLOTS, take_slot_lines

from .attach import REFUSED_MARK, attach_body, attach_prelude
from .holder import relay_script
from .host_check import NO_WINDOW_MARK, host_check_script
from .segments import DEFAULT_BOUND, DEFAULT_SEGMENT, shipped

__all__ = ["EXIT_BAD_START", "EXIT_NO_WINDOW", "start_script"]

EXIT_NO_WINDOW: Final = 89
"""The host would not keep a detached session (the host check's verdict): nothing started."""
EXIT_BAD_START: Final = 88
"""A start request with a bad session id, or for a session that exists already."""

_START = r"""
# The login's umask, for the agent: the kernel's word for it (Linux 4.7+), read without the fork
# of a command substitution; else the builtin's.
_ra_um=
{ while read -r _ra_k _ra_v; do
    case $_ra_k in Umask:) _ra_um=$_ra_v; break ;; esac
  done </proc/self/status; } 2>/dev/null
case $_ra_um in [0-7][0-7][0-7]|[0-7][0-7][0-7][0-7]) ;; *) _ra_um=$(umask) ;; esac
umask 077
IFS=' ' read -r _ra_id _ra_secret || _ra_refuse __BAD__ "no request"
case $_ra_id in ''|*[!A-Za-z0-9]*) _ra_refuse __BAD__ "bad session id" ;; esac
__SLOT__
D=$_ra_base/s-$_ra_id
mkdir -m 700 -- "$D" || _ra_refuse __BAD__ "session exists"
if command -v sha256sum >/dev/null 2>&1; then
  # Through the file itself, not a command substitution (one fork fewer): until the second write
  # it holds no "sha256 HEX" line, so an attachment in between is refused (a wrong secret).
  printf '%s' "$_ra_secret" | sha256sum >"$D/key"; _ra_h=; read -r _ra_h _ra_v <"$D/key"
  echo "sha256 $_ra_h" >"$D/key"
else
  printf 'plain %s\n' "$_ra_secret" >"$D/key"
fi
_ra_secret=
mkfifo "$D/in" "$D/out" "$D/err" "$D/obell" "$D/ibell" || { rm -rf "$D"; _ra_refuse __NOSLOTS__ "cannot make FIFOs"; }
_ra_name "$D/o" 0; : >"$_ra_v"; _ra_name "$D/i" 0; : >"$_ra_v"
# The agent's PATH: the login's, which the session script kept aside before adding its fallback.
[ -n "${_ra_had_path+1}" ] || _ra_had_path=${PATH+1} _ra_path=${PATH-}
if [ -n "$_ra_had_path" ]; then _ra_ap=+$_ra_path; else _ra_ap=-; fi
# A new session, so nothing aimed at this login's process group or session reaches the relay;
# no descriptor of the ssh channel, or sshd would keep the channel open for it.
if command -v setsid >/dev/null 2>&1; then _ra_ss=setsid; else _ra_ss=; fi
$_ra_ss __SHELL__ -c "$_ra_relay" ra-relay "$D" "$_ra_id" "$_ra_ap" "$_ra_um" "$@" \
  </dev/null >/dev/null 2>>"$D/relay.log" &
exec 9>&-
_ra_relay= _ra_ap= _ra_path=
_ra_fresh=1 _ra_k=0 _ra_j=0 _ra_mode=start
"""


def start_script(
    base: str | None,
    *,
    window_s: int,
    capacity: int | None = None,
    grace_s: int = 3,
    segment: int = DEFAULT_SEGMENT,
    bound: int = DEFAULT_BOUND,
    shell: str = "/bin/sh",
    check_host: bool = True,
    host_check: str | None = None,
) -> str:
    """The start step's text (see the module docstring). ``base``: the directory of the user's
    slots, where the session directory is made (made itself when missing); ``None``: the lines
    before this text set ``_ra_base`` to it (the session script's). ``window_s``: how long the
    session waits with nothing attached; ``capacity``: take one of the host's first
    ``capacity`` agent slots; ``None``: take none (descriptor 9, a slot the caller holds, goes to
    the relay all the same); ``grace_s``: between TERM and KILL when the tree is ended;
    ``segment``, ``bound``: see :mod:`.segments`; ``shell``: the command that runs the relay
    (words, e.g. ``busybox sh``); ``check_host``: run the host check first; ``host_check``: its
    text (:func:`.host_check.host_check_script` by default; tests point it at files).

    :raises ValueError: for a count below 1, bounds :func:`.segments.check_bounds` refuses, or a
        base that is not an absolute path.
    """
    relay = relay_script(window_s=window_s, grace_s=grace_s, segment=segment, bound=bound)
    lines = [f'_ra_refuse() {{ printf \'%s %s\\n\' {REFUSED_MARK} "$2"; exit "$1"; }}']
    if base is not None:
        if not base.startswith("/") or "\n" in base:
            raise ValueError("the base must be an absolute path on one line")
        lines += [
            f"_ra_base={shlex.quote(base)}",
            f'[ -d "$_ra_base" ] || mkdir -p -m 700 -- "$_ra_base" || _ra_refuse {EXIT_NO_SLOTS} "no slot directory"',
        ]
    if check_host:
        check = host_check_script(verdict_only=True) if host_check is None else host_check
        # A function run in a command substitution: its variables stay there, and no shell is
        # started for it.
        lines += [
            f"_ra_hc() {{\n{check.strip(chr(10))}\n}}",
            '_ra_check=$(_ra_hc "$_ra_base")',
            "case $_ra_check in *verdict=refuse*)",
            f"  printf '%s %s\\n' {shlex.quote(NO_WINDOW_MARK)} \"${{_ra_check#*reason=}}\" >&2",
            f'  _ra_refuse {EXIT_NO_WINDOW} "no reattach window on this host" ;;',
            "esac",
        ]
    lines.append(f"_ra_relay={shlex.quote(relay)}")
    slot = (
        take_slot_lines(
            capacity, directory="_ra_base", counter="_ra_n", refuse=f'_ra_refuse {EXIT_AT_CAPACITY} "at capacity"'
        )
        if capacity is not None
        else []
    )
    start = (
        _START.replace("__SLOT__", "\n".join(slot))
        .replace("__BAD__", str(EXIT_BAD_START))
        .replace("__NOSLOTS__", str(EXIT_NO_SLOTS))
        .replace("__SHELL__", shell)
    )
    return shipped("\n".join(lines) + "\n" + attach_prelude(None) + start + attach_body(segment=segment, bound=bound))
