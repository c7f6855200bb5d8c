"""An attachment: one ssh connection that takes a reattachable session over.

Run as ``sh -c TEXT`` on a new connection (or as the end of a reconnect's login,
:mod:`.login`), it reads one request line from stdin, ``ID K J MODE SECRET``: the session, the
output offset the controller has (it wants the output from ``K`` on), the input bytes it sent,
``attach`` (refused while another connection is attached) or ``takeover`` (the same controller
reconnecting: the older connection, dead or half-open, is ended), and the secret, read by the
``read`` builtin, so it is never in an argv or an environment. The secret's hash must match the
one the start step stored; a wrong secret is answered after a second, so guessing is slow.

A new controller that knows nothing of the session's counts sends ``-`` for either: ``K=-`` is the
output from the host's acknowledged offset (``ack``; the first kept segment's start if that is
higher), ``J=-`` takes the input the host has as what was sent. With ``J=-`` an input that does not
end with a newline (a frame a dead controller's lost link cut short) gets one first, so that
partial line cannot run into the new controller's first message; ``in=`` counts it.

Reply: ``RA-ATTACHED out=K in=J'`` (:data:`ATTACHED_MARK`), the actual numbers: ``K`` where the
output that follows starts, ``J'`` how many input bytes the host has (the controller resends from
there); then the agent's output from ``K`` on, raw; the controller counts bytes. Or ``RA-REFUSED
WHY`` (:data:`REFUSED_MARK`) and one of the exit codes below. Then stdin carries frames: ``D N``
and a newline then N bytes for the agent's stdin; ``A K`` (output received up to K: the host may
drop it); ``E`` (close the agent's stdin); ``X`` (end the session now: the relay ends the agent's
tree, and the rest of the output still comes); ``P`` (the controller is there: sent every
:data:`PING_S` seconds, and written to ``alive``, so a connection whose link was cut without a
word is ended by the relay, which then starts the window, however late sshd notices). At the
end of the output, stderr gets the last lines of the agent's stderr, each after
:data:`AGENT_LINE`, then ``RA-END out=N rc=R`` (:data:`END_MARK`) and stdout closes; once
stdin closes the exit status is the agent's. When stdin closes the attachment lets go of the
session's lock and pokes the relay, so an ended session is removed at once.

Frames are read without over-reading: the ``read`` builtin reads a pipe a byte at a time, and
``dd bs=N count=1`` at most N bytes. The session's lock is held by the connection's shell (the
follower closes its copy), so the relay sees it attached until that shell lets go or is gone.
The input's last segment is begun only when a byte is on its way, so it holds the input's last
byte (what ``J=-`` looks at).
"""

from __future__ import annotations

import shlex
from typing import Final

from .segments import AGENT_ERR_KEPT, DEFAULT_BOUND, DEFAULT_SEGMENT, SEGMENT_HELPERS, check_bounds, shipped

__all__ = [
    "AGENT_LINE",
    "ATTACHED_MARK",
    "END_MARK",
    "EXIT_ATTACHED_ELSEWHERE",
    "EXIT_BAD_REQUEST",
    "EXIT_NO_SESSION",
    "EXIT_OFFSET_GONE",
    "EXIT_WRONG_SECRET",
    "REFUSED_MARK",
    "attach_body",
    "attach_prelude",
    "attach_script",
    "is_relay_line",
]

PING_S: Final = 2
"""How often an attached controller says it is there (``P``): the relay ends a connection silent
for :data:`~.holder.SILENT_S`."""
EXIT_NO_SESSION: Final = 90
"""No such session: it expired, ended, or never started."""
EXIT_WRONG_SECRET: Final = 91
EXIT_ATTACHED_ELSEWHERE: Final = 92
"""Another connection is attached (and the request was not a takeover)."""
EXIT_OFFSET_GONE: Final = 93
"""The output from the requested offset is no longer kept (it was acknowledged), or the host has
more input than the controller says it sent."""
EXIT_BAD_REQUEST: Final = 94
ATTACHED_MARK: Final = "RA-ATTACHED"
REFUSED_MARK: Final = "RA-REFUSED"
END_MARK: Final = "RA-END"
AGENT_LINE: Final = "agent: "
"""What begins each line of the agent's stderr the end report is preceded by."""


def is_relay_line(line: str) -> bool:
    """Whether a line of an attachment's stderr is the relay's own (its header, refusal or end
    report): no reason for a person, and kept out of what is shown."""
    return line.startswith((ATTACHED_MARK, END_MARK, REFUSED_MARK))


_ATTACH = r"""
_ra_refuse() { printf '%s %s\n' __REFUSED__ "$2"; exit "$1"; }
case $_ra_id in ''|*[!A-Za-z0-9]*) _ra_refuse __BAD__ "bad session id" ;; esac
for _ra_v in "$_ra_k" "$_ra_j"; do
  case $_ra_v in -) ;; ''|*[!0-9]*) _ra_refuse __BAD__ "bad offsets" ;; esac
done
# no leading zeros: arithmetic would read them as octal
case $_ra_k in -) ;; *) _ra_dec ".$_ra_k"; _ra_k=$_ra_v ;; esac
case $_ra_j in -) ;; *) _ra_dec ".$_ra_j"; _ra_j=$_ra_v ;; esac
D=$_ra_base/s-$_ra_id
[ -d "$D" ] && [ ! -e "$D/expired" ] || _ra_refuse __GONE__ "no such session (expired, ended, or never started)"
if [ -z "${_ra_fresh-}" ]; then
  { read -r _ra_kind _ra_val <"$D/key"; } 2>/dev/null || _ra_refuse __GONE__ "no such session"
  case $_ra_kind in
    sha256) _ra_h=$(printf '%s' "$_ra_secret" | sha256sum); _ra_h=${_ra_h%% *} ;;
    plain) _ra_h=$_ra_secret ;;
    *) _ra_h= ;;
  esac
  _ra_secret=
  [ -n "$_ra_h" ] && [ "$_ra_h" = "$_ra_val" ] || { sleep 1; _ra_refuse __SECRET__ "wrong secret"; }
fi

# Whether the input ends with a newline (or is empty). The last segment is empty only when a link
# was lost right after a segment filled; then the one before tells, unless it was fed and removed.
_ra_lastnl() {
  _ra_g=$_ra_iseg
  if [ "$_ra_isize" = 0 ]; then
    [ "$_ra_in" = 0 ] && return 0
    _ra_g=; for _ra_f in "$D"/i.*; do [ "$_ra_f" = "$_ra_iseg" ] && break; _ra_g=$_ra_f; done
    [ -n "$_ra_g" ] || return 1
  fi
  _ra_v=$(tail -c 1 <"$_ra_g" | wc -l); [ $((_ra_v)) = 1 ]
}

exec 8>>"$D/attach.lock" || _ra_refuse __GONE__ "no such session"
# The relay takes a shared lock for a moment each second: retry a while.
_ra_lock() {
  _ra_i=0
  while [ "$_ra_i" -lt "$1" ]; do flock -n -x 8 && return 0; sleep 0.1; _ra_i=$((_ra_i + 1)); done
  return 1
}
if [ "$_ra_mode" = takeover ]; then _ra_tries=3; else _ra_tries=20; fi
if ! _ra_lock "$_ra_tries"; then
  [ "$_ra_mode" = takeover ] || _ra_refuse __ELSEWHERE__ "attached elsewhere"
  _ra_p=; { read -r _ra_p <"$D/attach.pgid"; } 2>/dev/null
  case $_ra_p in ''|*[!0-9]*) _ra_p= ;; *) [ "$_ra_p" -gt 1 ] && kill -TERM -"$_ra_p" 2>/dev/null ;; esac
  _ra_lock 20 || { [ -n "$_ra_p" ] && kill -KILL -"$_ra_p" 2>/dev/null; _ra_lock 20; } ||
    _ra_refuse __ELSEWHERE__ "attached elsewhere"
fi
[ -e "$D/expired" ] && _ra_refuse __GONE__ "expired"
# Our process group (sshd makes the login its own session): what a takeover ends.
{ read -r _ra_s <"/proc/$$/stat"; } 2>/dev/null; _ra_s=${_ra_s##*) }; set -- $_ra_s; echo "${3-}" >"$D/attach.pgid"
# When the controller was last heard from (uptime, hundredths): a link cut without a word keeps
# this connection, and its lock, until sshd notices; the relay reads this instead (see P).
_ra_alive() { read -r _ra_u _ra_x <"/proc/uptime"; _ra_dec ".${_ra_u%.*}${_ra_u#*.}"; echo "$_ra_v" >"$D/alive"; }
_ra_alive

_ra_first=0
for _ra_f in "$D"/o.*; do _ra_dec "$_ra_f"; _ra_first=$_ra_v; break; done
_ra_a=; { read -r _ra_a <"$D/ack"; } 2>/dev/null
case $_ra_a in ''|*[!0-9]*) _ra_a=0 ;; esac
# "-": from what the host had acknowledged (a new controller starts at its last whole line)
if [ "$_ra_k" = - ]; then _ra_k=$_ra_a; [ "$_ra_k" -ge "$_ra_first" ] || _ra_k=$_ra_first; fi
[ "$_ra_k" -ge "$_ra_first" ] || _ra_refuse __OFFSET__ "output below offset $_ra_first is no longer kept"
[ "$_ra_k" -gt "$_ra_a" ] && printf '%s\n' "$_ra_k" >"$D/ack"
_ra_lastseg "$D/i"; _ra_iseg=$_ra_v; _ra_dec "$_ra_iseg"; _ra_istart=$_ra_v
# The start step made the first input segment empty a moment ago: nothing to count.
if [ -n "${_ra_fresh-}" ]; then _ra_v=0; else _ra_size "$_ra_iseg"; fi
_ra_isize=$_ra_v; _ra_in=$((_ra_istart + _ra_isize))
if [ "$_ra_j" = - ]; then
  # What the host has is what was sent; a line a lost link cut short must not run into the new
  # controller's first one: it gets its end.
  if ! _ra_lastnl; then
    printf '\n' >>"$_ra_iseg"; _ra_isize=$((_ra_isize + 1)); _ra_in=$((_ra_in + 1)); _ra_ring "$D/ibell"
  fi
  _ra_j=$_ra_in
fi
[ "$_ra_in" -le "$_ra_j" ] || _ra_refuse __OFFSET__ "the host has $_ra_in input bytes, more than the $_ra_j sent"
printf '%s out=%s in=%s\n' __ATTACHED__ "$_ra_k" "$_ra_in" || exit 99

# The output from K on, then live. The doorbell is opened before the segments are looked at, so
# no ring after the look is lost.
_ra_follow() {
  exec 6<>"$D/obell"
  _ra_fseg=
  for _ra_f in "$D"/o.*; do _ra_dec "$_ra_f"; [ "$_ra_v" -le "$_ra_k" ] && { _ra_fseg=$_ra_f; _ra_fo=$_ra_v; }; done
  exec 5<"$_ra_fseg" || exit 1
  [ "$_ra_k" -gt "$_ra_fo" ] && { tail -c +$((_ra_k - _ra_fo + 1)) <&5 || exit 1; }
  _ra_g=0
  while :; do
    _ra_g=$((_ra_g + 1)); printf '%s\n' "$$.$_ra_g" >"$D/armed"
    _ra_e=; [ -e "$D/out.eof" ] && _ra_e=1
    _ra_nextseg "$D/o" "$_ra_fseg"; _ra_next=$_ra_v
    cat <&5 || exit 1  # the link is gone: the spool keeps it all
    if [ -n "$_ra_next" ]; then _ra_fseg=$_ra_next; exec 5<"$_ra_fseg"; continue; fi
    [ -n "$_ra_e" ] && break
    IFS= read -r _ra_x <&6
  done
  read -r _ra_end <"$D/out.eof"
  _ra_i=0; while [ ! -e "$D/rc" ] && [ "$_ra_i" -lt 30 ]; do sleep 0.1; _ra_i=$((_ra_i + 1)); done
  _ra_rc=; { read -r _ra_rc <"$D/rc"; } 2>/dev/null
  # The agent's last words, each line marked as the agent's (none can pass for the end report).
  # The relay keeps one byte more than it shows: when it kept them all, the first line is cut
  # short (left out: a secret in it would be half shown) or is only that byte's newline.
  # They are there once the agent's stderr ends: at the latest once the relay has ended what the
  # agent left behind ("tree.gone"), and a moment more for them to be written; a holder the
  # relay could not find is not waited for past that (nor anything past 15 s).
  _ra_i=0 _ra_last=750
  while [ ! -e "$D/agent.err" ] && [ "$_ra_i" -lt "$_ra_last" ]; do
    [ "$_ra_last" = 750 ] && [ -e "$D/tree.gone" ] && _ra_last=$((_ra_i + 25))
    sleep 0.02; _ra_i=$((_ra_i + 1))
  done
  if [ -s "$D/agent.err" ]; then
    _ra_size "$D/agent.err"; _ra_skip=0; [ "$_ra_v" -gt __ERR_KEPT__ ] && _ra_skip=1
    awk -v s="$_ra_skip" 'NR > s { print "__AGENT__" $0 }' "$D/agent.err" >&2
  fi
  printf '%s out=%s rc=%s\n' __END__ "$_ra_end" "$_ra_rc" >&2
}
( exec 8>&-; _ra_follow ) &
_ra_follower=$!
exec >/dev/null  # the follower alone holds the controller's stdout: its end is the end of output

_ra_fed() {
  _ra_fd=0; { read -r _ra_fd <"$D/in.fed"; } 2>/dev/null
  case $_ra_fd in ''|*[!0-9]*) _ra_fd=0 ;; esac
}
while IFS= read -r _ra_fr; do
  case $_ra_fr in
    "A "*)
      _ra_a=${_ra_fr#A }
      case $_ra_a in ''|*[!0-9]*) ;; *) printf '%s\n' "$_ra_a" >"$D/ack" ;; esac ;;
    "D "*)
      _ra_left=${_ra_fr#D }
      case $_ra_left in ''|*[!0-9]*) break ;; esac
      _ra_fed
      while [ $((_ra_in - _ra_fd)) -gt __BOUND__ ]; do sleep 0.1; _ra_fed; _ra_alive; done
      while [ "$_ra_left" -gt 0 ]; do
        # A full segment is followed only when a byte is on its way, so the last segment holds
        # the last byte (but for a link lost right there).
        if [ "$_ra_isize" -ge __SEGMENT__ ]; then
          _ra_istart=$_ra_in; _ra_isize=0; _ra_name "$D/i" "$_ra_in"; _ra_iseg=$_ra_v
        fi
        _ra_b=$_ra_left; [ "$_ra_b" -gt "$_ra_bs" ] && _ra_b=$_ra_bs
        dd bs="$_ra_b" count=1 >>"$_ra_iseg" 2>"$D/dd.in"
        _ra_ddcount "$D/dd.in" "$_ra_b"
        case $_ra_n in
          0) break 2 ;;  # the link ended mid-frame: the controller resends from what we have
          '') _ra_size "$_ra_iseg"; _ra_n=$((_ra_v - _ra_isize)) ;;
        esac
        _ra_isize=$((_ra_isize + _ra_n)); _ra_in=$((_ra_in + _ra_n)); _ra_left=$((_ra_left - _ra_n))
        _ra_alive  # a long frame is a controller that is there
      done
      _ra_ring "$D/ibell" ;;
    E) echo "$_ra_in" >"$D/in.eof"; _ra_ring "$D/ibell" ;;
    X) : >"$D/stop"; _ra_poke ;;
    P) _ra_alive ;;
    *) break ;;
  esac
done
# The link is gone or the controller is done: the follower goes, the session stays with the
# relay, which is told at once (an ended session is removed without waiting for a tick).
kill "$_ra_follower" 2>/dev/null
_ra_rc=; { read -r _ra_rc <"$D/rc"; } 2>/dev/null
exec 8>&-
_ra_poke
case $_ra_rc in ''|*[!0-9]*) exit 99 ;; *) exit "$_ra_rc" ;; esac
"""


def attach_prelude(base: str | None) -> str:
    """What the attachment's text needs set first: the sessions' directory ``base`` (``None``:
    the lines before set ``_ra_base``) and the shared helpers (the start step's own lines come
    between this and :func:`attach_body`)."""
    return SEGMENT_HELPERS if base is None else f"_ra_base={shlex.quote(base)}\n{SEGMENT_HELPERS}"


def attach_body(*, segment: int, bound: int) -> str:
    """The attachment's text after its request was read into ``_ra_id``, ``_ra_k``, ``_ra_j``,
    ``_ra_mode`` and ``_ra_secret`` (``_ra_fresh`` set: the start step, no secret to check), and
    after :func:`attach_prelude`. ``segment``: input segment size; ``bound``: undelivered input
    kept at most."""
    check_bounds(segment, bound)
    return (
        _ATTACH.replace("__REFUSED__", REFUSED_MARK)
        .replace("__ATTACHED__", ATTACHED_MARK)
        .replace("__END__", END_MARK)
        .replace("__AGENT__", AGENT_LINE)
        .replace("__ERR_KEPT__", str(AGENT_ERR_KEPT))
        .replace("__GONE__", str(EXIT_NO_SESSION))
        .replace("__SECRET__", str(EXIT_WRONG_SECRET))
        .replace("__ELSEWHERE__", str(EXIT_ATTACHED_ELSEWHERE))
        .replace("__OFFSET__", str(EXIT_OFFSET_GONE))
        .replace("__BAD__", str(EXIT_BAD_REQUEST))
        .replace("__SEGMENT__", str(segment))
        .replace("__BOUND__", str(bound))
    )


def attach_script(base: str | None, *, segment: int = DEFAULT_SEGMENT, bound: int = DEFAULT_BOUND) -> str:
    """The whole attachment (see the module docstring) for sessions in ``base`` (``None``: the
    lines before set ``_ra_base``, as the reconnect's login does, :mod:`.login`)."""
    request = (
        "IFS=' ' read -r _ra_id _ra_k _ra_j _ra_mode _ra_secret || "
        f"{{ printf '%s %s\\n' {REFUSED_MARK} 'no request'; exit {EXIT_BAD_REQUEST}; }}\n"
    )
    return shipped(request + attach_prelude(base) + attach_body(segment=segment, bound=bound))
