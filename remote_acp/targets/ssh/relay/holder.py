"""The relay: what holds a reattachable session on the host, outliving every ssh connection.

The start step runs it detached (``setsid``, its standard streams on ``/dev/null`` and a log, no
descriptor of the ssh channel) as ``sh -c TEXT ra-relay D TOKEN PATH UMASK AGENT ARGS...``, with
descriptor 9 the slot's lock (when the session holds one). ``PATH`` is ``+`` and the agent's
PATH, or ``-`` for none; ``UMASK`` the agent's (the steps run under ``077``). It writes its pid
and start time to ``relay.pid`` and starts, in the session directory ``D`` (see :mod:`.segments`):

* the agent, stdin the ``in`` FIFO, stdout the ``out`` FIFO, stderr the ``err`` FIFO, its
  environment marked ``_RA_SESSION=TOKEN.`` so descendants that leave its tree are still found.
  It runs under a subshell of the relay's that, the moment the agent ends, writes its status to
  ``rc`` and pokes the relay; that subshell holds the agent's stdout until then, so ``rc`` is
  there before the spooler sees the end of the output and the attached connection reports the
  end at once (tens of milliseconds), not at the relay's next tick;
* the spooler: the agent's output into ``o.*`` segments, one ``dd`` read at a time, never more
  than the bound unacknowledged (beyond it the spooler stops reading and the agent's writes block:
  backpressure, not loss);
* the feeder: ``i.*`` segments into the agent's stdin, each byte once. The relay itself holds the
  ``in`` FIFO read-write for as long as the feeder starts, so no open blocks and the agent sees an
  end of file only when the feeder, its last writer, ends (the controller closed its input);
* the agent's stderr: read as it comes and dropped but for its last bytes, written to
  ``agent.err`` once it ends (for the end report, :mod:`.attach`).

Then it watches, on a tick of a second that a poke (``SIGUSR1``, see :mod:`.segments`) cuts
short, so an idle session costs one ``sleep`` a second and an event is seen at once: an attached
connection holds ``attach.lock`` exclusively, so a shared lock that succeeds means nobody is
attached. Nobody attached for the window (counted from the first tick that found nobody, so
never less than the window after the link was lost): the agent's whole tree is ended (TERM, KILL
after the grace), the slot freed, ``D`` removed. The agent ended and the controller acknowledged all its
output: the same teardown. A ``stop`` file (the controller's ``X`` frame): the tree is ended at
once, its status recorded, and the output drains to the attached connection as at any end;
with nobody attached the session is removed without waiting for acknowledgements or the window.
Whatever the relay signals is computed when it signals (the agent while it is still its child;
descendants from ``/proc``; marked processes from their environment), never remembered, since a
pid may be reused; during the grace it looks again every tenth of a second.

Descriptors are closed with ``exec`` inside each subshell: a redirection on a function call
makes dash keep a saved copy (descriptor 10 and up) for as long as the function runs, and a saved
copy of the ``in`` FIFO's write end would keep the agent's stdin open forever.
"""

from __future__ import annotations

from typing import Final

from .segments import AGENT_ERR_KEPT, DEFAULT_BOUND, DEFAULT_SEGMENT, SEGMENT_HELPERS, check_bounds

__all__ = ["relay_script"]

_RELAY = r"""
D=$1; _ra_token=$2; _ra_apath=$3; _ra_umask=$4; shift 4
# A poke (USR1) cuts the current tick short; set before anything could send one.
_ra_wake=; trap '_ra_wake=1' USR1
[ -d "$D" ] || exit 1  # and we stay where the start step was: the agent's working directory

_ra_spool() {
  _ra_st=0 _ra_sz=0 _ra_unk=0 _ra_ack=0
  _ra_name "$D/o" 0; _ra_seg=$_ra_v
  while :; do
    if [ $((_ra_sz + _ra_unk)) -ge __SEGMENT__ ] ||
       [ $((_ra_st + _ra_sz + _ra_unk - _ra_ack + _ra_bs)) -gt __BOUND__ ]; then
      # dd did not say how much it copied: the segment's size does
      if [ "$_ra_unk" -gt 0 ]; then _ra_size "$_ra_seg"; _ra_sz=$_ra_v; _ra_unk=0; fi
      if [ "$_ra_sz" -ge __SEGMENT__ ]; then
        _ra_st=$((_ra_st + _ra_sz)); _ra_sz=0
        _ra_name "$D/o" "$_ra_st"; _ra_seg=$_ra_v; : >>"$_ra_seg"
      fi
      # full: the agent blocks on its pipe until the controller acknowledges
      while _ra_read_ack; _ra_drop; [ $((_ra_st + _ra_sz - _ra_ack + _ra_bs)) -gt __BOUND__ ]; do
        sleep 0.1
      done
    fi
    dd bs=$_ra_bs count=1 >>"$_ra_seg" 2>"$D/dd.out"
    _ra_ddcount "$D/dd.out" "$_ra_bs"
    case $_ra_n in
      0) break ;;
      '') _ra_unk=$((_ra_unk + _ra_rec * _ra_bs)) ;;
      *) _ra_sz=$((_ra_sz + _ra_n)) ;;
    esac
    _ra_ring_armed
  done
  [ "$_ra_unk" -gt 0 ] && { _ra_size "$_ra_seg"; _ra_sz=$_ra_v; }
  echo $((_ra_st + _ra_sz)) >"$D/out.eof.tmp" && mv "$D/out.eof.tmp" "$D/out.eof"
  _ra_ring "$D/obell"
}
# A torn read of "ack" gives a prefix of the number: smaller, and still true.
_ra_read_ack() {
  _ra_a=; { read -r _ra_a <"$D/ack"; } 2>/dev/null
  case $_ra_a in ''|*[!0-9]*) ;; *)
    [ "$_ra_a" -gt "$_ra_ack" ] && [ "$_ra_a" -le $((_ra_st + _ra_sz + _ra_unk)) ] && _ra_ack=$_ra_a ;;
  esac
}
# A segment whose successor starts at or before the ack is acknowledged whole.
_ra_drop() {
  _ra_pr=
  for _ra_g in "$D"/o.*; do
    if [ -n "$_ra_pr" ]; then _ra_dec "$_ra_g"; [ "$_ra_v" -le "$_ra_ack" ] || break; rm -f "$_ra_pr"; fi
    _ra_pr=$_ra_g
  done
}

_ra_feed() {
  exec 6<>"$D/ibell"
  _ra_name "$D/i" 0; _ra_fseg=$_ra_v
  exec 5<"$_ra_fseg"
  while :; do
    _ra_e=; [ -e "$D/in.eof" ] && _ra_e=1
    _ra_nextseg "$D/i" "$_ra_fseg"; _ra_next=$_ra_v
    cat <&5 >&4 || return 1
    if [ -n "$_ra_next" ]; then
      rm -f "$_ra_fseg"; _ra_fseg=$_ra_next; exec 5<"$_ra_fseg"
      _ra_dec "$_ra_fseg"; echo "$_ra_v" >"$D/in.fed"
      continue
    fi
    [ -n "$_ra_e" ] && return 0
    IFS= read -r _ra_x <&6
  done
}

_ra_stat() {
  _ra_s= _ra_state= _ra_pp=
  { read -r _ra_s <"/proc/$1/stat"; } 2>/dev/null
  _ra_s=${_ra_s##*) }
  set -- $_ra_s
  _ra_state=${1-} _ra_pp=${2-} _ra_start=${20-}
}
_ra_tree() {
  cat /proc/[0-9]*/stat 2>/dev/null | sed -n 's/^\([0-9][0-9]*\) .*) \([A-Za-z]\) \([0-9][0-9]*\) .*/\1 \3 \2/p' |
  awk -v roots="$*" '
    BEGIN { n = split(roots, r, " "); for (i = 1; i <= n; i++) root[r[i]] = 1 }
    $3 != "Z" { parent[$1] = $2 }
    END { for (p in parent) { q = p; n = 0
            while (!(q in root) && (q in parent) && q > 1 && n < 64) { q = parent[q]; n++ }
            if (q in root) print p } }'
}
_ra_marked() {
  for _ra_m in $(grep -l -s -a "_RA_SESSION=$_ra_token\." /proc/[0-9]*/environ 2>/dev/null); do
    _ra_m=${_ra_m#/proc/}; echo "${_ra_m%/environ}"
  done
}
# The agent (while it is still our child) last: what it started is signalled first.
_ra_targets() {
  _ra_ag=; _ra_stat "$_ra_agent"; [ "$_ra_pp" = $$ ] && [ "$_ra_state" != Z ] && _ra_ag=$_ra_agent
  _ra_mk=$(_ra_marked)
  [ -n "$_ra_ag$_ra_mk" ] || return 0
  _ra_tree $_ra_ag $_ra_mk | awk -v a="$_ra_ag" '$1 != a && !seen[$1]++ { print $1 } END { if (a != "") print a }'
}
# The grace is counted on the clock, not in rounds: a scan of /proc on a busy host takes a while.
_ra_kill_tree() {
  _ra_set=$(_ra_targets); [ -n "$_ra_set" ] || return 0
  kill -TERM $_ra_set 2>/dev/null
  _ra_now; _ra_until=$((_ra_t + __GRACE_HUNDREDTHS__))
  while :; do
    sleep 0.1
    _ra_set=$(_ra_targets); [ -n "$_ra_set" ] || return 0
    _ra_now; [ "$_ra_t" -lt "$_ra_until" ] || break
  done
  kill -KILL $_ra_set 2>/dev/null
}

# Written in place, not renamed into place (an mv on the agent's way): a poke that finds the file
# empty finds no pid to signal, as it would find no file; and it is written before the agent starts.
_ra_stat $$; echo "$$ $_ra_start" >"$D/relay.pid"
exec 4<>"$D/in"
( exec 4>&- 9>&-; _ra_spool ) <"$D/out" 2>>"$D/relay.log" &
_ra_spooler=$!
# The agent under a subshell of ours that records its status as it ends and wakes us: the end
# reaches the attached connection without waiting for a tick. Its TERM is caught, so the tree's
# TERM leaves it to record the agent's own status (a caught signal is the default again after exec).
(
  trap : TERM
  ( umask "$_ra_umask"; case $_ra_apath in -) unset PATH ;; *) PATH=${_ra_apath#?} ;; esac
    export _RA_SESSION="$_ra_token."; exec "$@" )
  _ra_x=$?
  echo "$_ra_x" >"$D/rc.tmp" && mv "$D/rc.tmp" "$D/rc"
  _ra_poke; exit "$_ra_x"
) <"$D/in" >"$D/out" 2>"$D/err" 4>&- &
_ra_agent=$!
( exec 4>&- 9>&-; tail -c __ERR_READ__ >"$D/agent.err.tmp" 2>/dev/null
  mv "$D/agent.err.tmp" "$D/agent.err" ) <"$D/err" &
( exec 9>&-; _ra_feed ) </dev/null >/dev/null 2>>"$D/relay.log" &
_ra_feeder=$!
exec 4>&- 8>>"$D/attach.lock"
trap '' HUP PIPE  # only now: the agent must not inherit an ignored SIGPIPE

# Uptime in hundredths of a second, without a fork.
_ra_now() { read -r _ra_t _ra_x <"/proc/uptime"; _ra_dec ".${_ra_t%.*}${_ra_t#*.}"; _ra_t=$_ra_v; }
# The end, with nobody attached (we hold the lock) and nobody attaching again ("expired").
_ra_end() {
  echo "end: $1" >>"$D/relay.log"
  : >"$D/expired"
  [ -n "$_ra_rc" ] || _ra_kill_tree
  _ra_agent=0; _ra_kill_tree
  kill -TERM "$_ra_feeder" "$_ra_spooler" 2>/dev/null
  exec 9>&-
  trap '' TERM; kill -TERM 0 2>/dev/null  # our process group: a dd or cat still blocked
  cd / && rm -rf "$D"
  exit 0
}
_ra_now; _ra_seen=$_ra_t; _ra_rc= _ra_stopped= _ra_att=1
while :; do
  # A tick, cut short by a poke (wait returns on a trapped signal); its sleep goes with it.
  sleep 1 & _ra_sl=$!
  if [ -n "$_ra_wake" ] || ! wait "$_ra_sl"; then kill "$_ra_sl" 2>/dev/null; fi
  _ra_wake=
  _ra_now
  # The window runs from the first tick that finds nobody attached: the link was lost before it.
  [ -n "$_ra_att" ] && _ra_seen=$_ra_t
  if flock -n -s 8; then flock -u 8; _ra_att=; else _ra_att=1; fi
  if [ -n "$_ra_att" ]; then
    # Attached, but silent past the bound (its controller pings every few seconds): the link was
    # cut without a word, and sshd has not noticed. End that connection, as a takeover would,
    # so the window starts.
    _ra_al=; { read -r _ra_al <"$D/alive"; } 2>/dev/null
    case $_ra_al in ''|*[!0-9]*) ;; *)
      if [ $((_ra_t - _ra_al)) -gt __SILENT__00 ]; then
        _ra_p=; { read -r _ra_p <"$D/attach.pgid"; } 2>/dev/null
        case $_ra_p in ''|*[!0-9]*) ;; *)
          [ "$_ra_p" -gt 1 ] && [ "$_ra_p" != "$$" ] && kill -KILL -"$_ra_p" 2>/dev/null &&
            echo "the attached connection went silent: ended" >>"$D/relay.log" ;;
        esac
      fi ;;
    esac
  fi
  if [ -z "$_ra_rc" ]; then
    if [ -z "$_ra_stopped" ] && [ -e "$D/stop" ]; then
      _ra_stopped=1; echo "stop: the controller ends the session" >>"$D/relay.log"; _ra_kill_tree
    fi
    _ra_stat "$_ra_agent"
    if [ "$_ra_pp" != $$ ] || [ "$_ra_state" = Z ]; then
      # Its status, as its subshell recorded it. Not from "wait" once the shell has reaped it:
      # bash 5.2 loses the status of a child reaped while a trapped signal cut a "wait" short,
      # and a later "wait" for it blocks until another child ends. Only a subshell killed before
      # it could record (SIGKILL after the grace) has none: a zombie is waited for, else 137.
      { read -r _ra_rc <"$D/rc"; } 2>/dev/null
      case $_ra_rc in ''|*[!0-9]*)
        if [ "$_ra_state" = Z ]; then wait "$_ra_agent"; _ra_rc=$?; else _ra_rc=137; fi
        echo "$_ra_rc" >"$D/rc.tmp" && mv "$D/rc.tmp" "$D/rc" ;;
      esac
      _ra_agent=0; _ra_kill_tree  # what the agent left behind
      : >"$D/tree.gone"           # so its stderr has ended (but for a holder we could not find)
      exec 9>&-                   # the slot is free while the controller drains the output
    fi
  fi
  if [ -n "$_ra_rc" ] && [ -e "$D/stop" ] && [ -z "$_ra_att" ] && flock -n -x 8; then
    _ra_end "ended by the controller, rc=$_ra_rc, nothing attached"
  fi
  if [ -n "$_ra_rc" ] && [ -e "$D/out.eof" ]; then
    read -r _ra_e <"$D/out.eof"; _ra_a=; { read -r _ra_a <"$D/ack"; } 2>/dev/null
    case $_ra_a in ''|*[!0-9]*) _ra_a=0 ;; esac
    [ "$_ra_a" -ge "$_ra_e" ] && flock -n -x 8 && _ra_end "done rc=$_ra_rc, all $_ra_e bytes acknowledged"
  fi
  if [ -z "$_ra_att" ] && [ $((_ra_t - _ra_seen)) -ge __WINDOW__00 ] && flock -n -x 8; then
    _ra_end "nothing attached for __WINDOW__ s"
  fi
done
"""


SILENT_S: Final = 10
"""An attached connection not heard from for this long is ended (its controller sends ``P`` every
:data:`~.attach.PING_S` seconds): a cut link then starts the window within this bound, however
long the host's sshd takes to notice."""


def relay_script(*, window_s: int, grace_s: int = 3, segment: int = DEFAULT_SEGMENT, bound: int = DEFAULT_BOUND) -> str:
    """The relay's text (see the module docstring): ``window_s`` seconds with nothing attached
    before the session ends, ``grace_s`` between TERM and KILL, output ``segment`` size and the
    ``bound`` of unacknowledged output.

    :raises ValueError: a window or grace below 1 s, or bounds :func:`.segments.check_bounds` refuses.
    """
    for name, value in (("window_s", window_s), ("grace_s", grace_s)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be an integer of at least 1")
    check_bounds(segment, bound)
    values = {
        "__SILENT__": str(SILENT_S),
        "__WINDOW__": str(window_s),
        "__GRACE_HUNDREDTHS__": str(100 * grace_s),
        "__SEGMENT__": str(segment),
        "__BOUND__": str(bound),
        "__ERR_READ__": str(AGENT_ERR_KEPT + 1),  # one byte more than shown: see the attach step
    }
    text = _RELAY
    for name, replacement in values.items():
        text = text.replace(name, replacement)
    return SEGMENT_HELPERS + text
