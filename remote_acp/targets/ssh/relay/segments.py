"""The session directory's layout, and the shell helpers every step of a reattachable session shares.

A session lives in a directory ``D`` (mode 0700) inside the user's private slot directory:

``key``
    ``sha256 HEX`` (the secret's hash) or, on a host without ``sha256sum``, ``plain SECRET``; 0600.
``o.OFFSET``, ``i.OFFSET``
    the agent's output and the controller's input, in segment files named by the offset of their
    first byte (15 digits, zero-padded, so a glob lists them in order). An output segment is
    closed once it holds :data:`DEFAULT_SEGMENT` bytes; a segment wholly below the controller's
    acknowledged offset is removed, so the output kept is bounded (:data:`DEFAULT_BOUND`).
``ack``
    the highest output offset the controller acknowledged; ``in.fed`` the first offset of the
    input segment being delivered; ``out.eof`` and ``in.eof`` the final offsets; ``rc`` the
    agent's exit status.
``relay.pid``
    the relay's pid and start time (field 22 of ``/proc/PID/stat``): what a poke signals.
``stop``
    the controller ended the session (an ``X`` frame): the relay ends the agent's tree now.
``in``, ``out``, ``err``
    FIFOs: the agent's stdin, stdout and stderr (never the ssh channel, so a lost link is never an
    end of file or a broken pipe for the agent).
``obell``, ``ibell``
    doorbell FIFOs: a writer rings (one newline) after each append, and a waiting reader wakes.
    A ring is written through a read-write open, which never blocks on Linux; when no reader
    holds the FIFO the byte is discarded with the close.
``attach.lock``, ``attach.pgid``
    flocked exclusively by the attached connection; its process group (what a takeover ends).
``expired``
    the relay is tearing the session down: nobody attaches any more.

A poke (:func:`_ra_poke` in the helpers) wakes the relay out of its tick with ``SIGUSR1``: the
agent's end, a ``stop``, an attachment gone. It signals only the process ``relay.pid`` names,
and only while that process's start time is the one written there, so a pid reused after the
relay died is never signalled.

Waiting: the portable path only, ``dd`` (one read of at most 64 KiB a fork) and a doorbell read
by the ``read`` builtin. Measured on the prototype (dash, bash and BusyBox ash, 20-1000 lines/s):
5-20 ms median from the agent's write to the attached reader (BusyBox: 6-28 ms) and 5-40 % of a
core at 1000 lines/s; GNU ``tail -f`` fed by ``cat`` was faster (0.1 ms) but needs GNU tail and a
second follower to keep right, so it is left out. An ``awk`` spooler cost less CPU but carries
lines only, and an agent's output is bytes.

Pitfalls the helpers avoid: arithmetic reads ``000123`` as octal (:func:`_ra_dec` strips the
zeros); dd reports its byte count on a third stderr line that BusyBox may not print, and GNU dd
may warn first about a partial read (:func:`_ra_ddcount` reads the lines by their words).
"""

from __future__ import annotations

from typing import Final

__all__ = ["AGENT_ERR_KEPT", "BLOCK", "DEFAULT_BOUND", "DEFAULT_SEGMENT", "SEGMENT_HELPERS", "check_bounds", "shipped"]

BLOCK: Final = 65536
"""The most one read of a pipe returns on Linux: every dd reads one block."""
DEFAULT_SEGMENT: Final = 1 << 20
"""Bytes an output or input segment holds before the next one begins."""
DEFAULT_BOUND: Final = 8 << 20
"""Unacknowledged output kept on the host at most (the agent's writes block beyond), and
undelivered input kept at most (the controller's frames wait beyond)."""
AGENT_ERR_KEPT: Final = 4096
"""The last bytes of the agent's stderr the relay keeps, for the end report (:mod:`.attach`)."""

SEGMENT_HELPERS: Final = r"""
LC_ALL=C; export LC_ALL
_ra_bs=65536
_ra_dec() {
  _ra_v=${1##*.}
  while :; do case $_ra_v in 0?*) _ra_v=${_ra_v#0} ;; *) break ;; esac; done
}
# _ra_name PREFIX OFFSET: PREFIX.OFFSET, the offset zero-padded to 15 digits (printf's %015d,
# without the fork of a command substitution).
_ra_name() {
  _ra_v=$2
  while [ "${#_ra_v}" -lt 15 ]; do _ra_v=0$_ra_v; done
  _ra_v=$1.$_ra_v
}
_ra_ring() { { printf '\n' >&7; } 7<>"$1" 2>/dev/null; }
# Ring the output doorbell only when the follower armed it again since our last ring (it writes
# a new value to "armed" before each drain): a busy follower is not woken for nothing.
_ra_ring_armed() {
  _ra_a=; { read -r _ra_a <"$D/armed"; } 2>/dev/null
  [ "$_ra_a" = "${_ra_lastarm-}" ] && return 0
  _ra_lastarm=$_ra_a; _ra_ring "$D/obell"
}
# Wake the relay now (see the module docstring); a no-op when it is gone.
_ra_poke() {
  _ra_pk= _ra_pt=; { read -r _ra_pk _ra_pt <"$D/relay.pid"; } 2>/dev/null
  case $_ra_pk in ''|*[!0-9]*) return 0 ;; esac
  _ra_ps=; { read -r _ra_ps <"/proc/$_ra_pk/stat"; } 2>/dev/null
  _ra_ps=${_ra_ps##*) }; set -- $_ra_ps
  [ -n "$_ra_pt" ] && [ "${20-}" = "$_ra_pt" ] && kill -USR1 "$_ra_pk" 2>/dev/null
  return 0
}
# _ra_ddcount FILE BS: dd's count from its stderr in FILE: _ra_n bytes ("" when it does not say),
# _ra_rec reads done ("F+P records in").
_ra_ddcount() {
  _ra_r= _ra_n=
  while read -r _ra_a _ra_b _ra_c _ra_x; do
    case "$_ra_b $_ra_c" in "records in") _ra_r=$_ra_a ;; esac
    case $_ra_b in bytes) _ra_n=$_ra_a ;; esac
  done <"$1"
  _ra_f=${_ra_r%%+*} _ra_p=${_ra_r#*+}
  case $_ra_f$_ra_p in ''|*[!0-9]*) _ra_f=0 _ra_p=1 ;; esac
  _ra_rec=$((_ra_f + _ra_p))
  case $_ra_n in ''|*[!0-9]*) _ra_n= ;; esac
  [ "$_ra_rec" = 0 ] && _ra_n=0
  [ -z "$_ra_n" ] && [ "$_ra_p" = 0 ] && _ra_n=$((_ra_f * $2))
}
_ra_size() { _ra_v=$(wc -c <"$1"); _ra_v=$((_ra_v)); }
_ra_lastseg() {
  _ra_l=
  for _ra_f in "$1".*; do [ -e "$_ra_f" ] && _ra_l=$_ra_f; done
  _ra_v=$_ra_l
}
# The first segment after CURRENT, by offset: CURRENT itself may be gone already (removed once
# acknowledged, while a follower still reads it through its descriptor).
_ra_nextseg() {
  _ra_dec "$2"; _ra_cur=$_ra_v; _ra_l=
  for _ra_f in "$1".*; do
    [ -e "$_ra_f" ] || continue
    _ra_dec "$_ra_f"; [ "$_ra_v" -gt "$_ra_cur" ] && { _ra_l=$_ra_f; break; }
  done
  _ra_v=$_ra_l
}
"""
"""The helpers, for a script that sets ``D`` to the session directory."""


def check_bounds(segment: int, bound: int) -> None:
    """Refuse segment and bound sizes the helpers cannot keep.

    :raises ValueError: unless both are whole multiples of :data:`BLOCK` and the bound holds at
        least two segments.
    """
    for name, value in (("segment", segment), ("bound", bound)):
        if not isinstance(value, int) or isinstance(value, bool) or value < BLOCK or value % BLOCK:
            raise ValueError(f"the {name} size must be a positive multiple of {BLOCK} bytes")
    if bound < 2 * segment:
        raise ValueError("the bound must hold at least two segments")


def shipped(text: str) -> str:
    """``text`` without its comment lines, which every host would read for nothing (the steps'
    text has no line starting with ``#`` inside a quoted string but comments)."""
    return "".join(line for line in text.splitlines(keepends=True) if not line.lstrip().startswith("#"))
