"""The probe as a command: one POSIX sh script that reads a host and prints a report.

The runner opens one channel whose remote command is :data:`PROBE_COMMAND` and writes
:func:`probe_script` to its stdin. sshd hands the command to the user's login shell (sh, bash,
zsh, fish, csh...), so the command is one fixed line every shell reads the same way: no quote,
no ``$``, no data. The script and every byte of data reach ``/bin/sh`` through stdin.

The data (the agent program and the workspace) sit in the script as one line of octal escapes
(``\\0ooo``, decoded by ``printf %b``) and harmless characters (:mod:`hostinv.shell_data`, as
in a session's script), which decodes to assignments quoted by :func:`shlex.quote`: no shell
reads a byte of it as code, whatever it holds. A dotfile that eats part of stdin can make the
report wrong or absent (the parser says so), never run data.

The report (see :mod:`hostinv.probes.parse`) is ``key=value`` lines between :data:`REPORT_HEADER`
and :data:`REPORT_END`. Every value is escaped on the host (``\\\\``, and ``\\xNN`` for each
control byte, newlines included), so no output, however hostile, can start a line of its own
and forge a key. Anything a dotfile prints before the header is not part of the report.

A probe changes nothing on the host: it creates no file (no temporary file, no heredoc), tests
the workspace with ``test -d``/``test -w`` only, counts agent slots from ``/proc/locks`` without
taking a lock, and runs exactly two programs beyond the usual read-only tools: ``AGENT
--version`` (unless the caller skips it) and, when the agent is not on the session's PATH, the
login shell asked for its PATH. Both are bounded (see :func:`probe_script`) and killed with whatever
they started (their own session through ``setsid`` where it exists), so none outlives the probe.

Why the login shell is asked for its PATH, not to run ``command -v``: ``tcsh -l`` takes no other
flag (so no ``-c``), csh has no ``command``, and fish's syntax differs. Every shell reads
``echo WORD; printenv PATH; echo WORD`` from stdin alike, and ``/bin/sh`` then looks for the
program in that PATH itself, which also names the directory to add. sh, bash, zsh and ksh are
asked as interactive login shells (``-i -l``), as an ``ssh`` in by hand starts them: the classic
"works when I ssh in" is a PATH set in ``~/.bashrc`` after its interactivity guard, or in
``~/.zshrc``. csh and tcsh read ``~/.cshrc`` in every shell and fish reads ``config.fish`` in
every shell, so they are asked with ``-l`` alone (``tcsh -l`` refuses other flags).
"""

from __future__ import annotations

import shlex
from typing import Final

from ..shell_data import data_line
from ..slots import PRIVATE, slot_dir_lines

__all__ = [
    "EXIT_DATA_INCOMPLETE",
    "LOGIN_TIMEOUT_S",
    "MAX_VALUE_CHARS",
    "PROBE_COMMAND",
    "REPORT_END",
    "REPORT_HEADER",
    "REPORT_VERSION",
    "VERSION_TIMEOUT_S",
    "probe_script",
]

PROBE_COMMAND: Final = "/bin/sh -s"
"""The remote command of the probe's channel; the script goes on its stdin. Fixed, and read
alike by every login shell. ``/bin/sh`` by its path: a dotfile may have trimmed PATH."""
REPORT_VERSION: Final = 1
REPORT_HEADER: Final = f"#hostinv-probe {REPORT_VERSION}"
REPORT_END: Final = "#hostinv-probe end"
EXIT_DATA_INCOMPLETE: Final = 98
"""The script's data line did not decode whole (stdin was cut or eaten): nothing was probed."""
VERSION_TIMEOUT_S: Final = 2
LOGIN_TIMEOUT_S: Final = 3
MAX_VALUE_CHARS: Final = 1024
"""Bytes of a value the host escapes and prints; the rest is dropped there."""

_LOGIN_MARK = "hostinv-login-path"

# The body, after the data line. LC_ALL=C: byte-wise patterns and C number formats in every
# tool's output. Variables are _hp_*; functions are defined before any output.
_BODY = r"""
LC_ALL=C; export LC_ALL
_hp_nl='
'
_hp_sid=
command -v setsid >/dev/null 2>&1 && _hp_sid=setsid
_hp_miss=

# _hp_put KEY VALUE: one report line. Each byte stays as it is, but a backslash doubles and a
# control byte (newline, CR, ESC...) becomes \xNN, so the value cannot end its line. A short
# value with neither is kept as it is: the byte-by-byte loop is most of a probe's own time.
# Lines are kept in _hp_rep and written by _hp_flush before each step that may hang (df on a
# dead mount, the agent, the login shell) and at the end: a write per line would be a packet
# per line for sshd to encrypt and the client to decrypt.
_hp_flush() { printf '%s' "$_hp_rep"; _hp_rep=; }
_hp_put() {
  case $2 in *\\*|*[[:cntrl:]]*) ;; *)
    if [ "${#2}" -le __MAX__ ]; then _hp_rep=$_hp_rep$1=$2$_hp_nl; return; fi ;;
  esac
  _hp_s=$2 _hp_o= _hp_n=0
  while [ -n "$_hp_s" ] && [ "$_hp_n" -lt __MAX__ ]; do
    _hp_r=${_hp_s#?}; _hp_c=${_hp_s%"$_hp_r"}; _hp_s=$_hp_r
    case $_hp_c in
      \\) _hp_o="$_hp_o\\\\" ;;
      [[:cntrl:]]) _hp_o=$_hp_o$(printf '\\x%02x' "'$_hp_c") ;;
      *) _hp_o=$_hp_o$_hp_c ;;
    esac
    _hp_n=$((_hp_n + 1))
  done
  _hp_rep=$_hp_rep$1=$_hp_o$_hp_nl
}
_hp_unavailable() { _hp_miss=${_hp_miss:+$_hp_miss,}$1; }
_hp_int() { case $1 in ''|*[!0-9]*) return 1 ;; esac; }
# _hp_start: _hp_st, the start time of process _hp_p (_START_TIME, below), empty without /proc.
_hp_start() { __START_TIME__; _hp_int "$_hp_st" || _hp_st=; }
# _hp_owned DIR UID: DIR is UID's. test -O (the effective uid's) where the shell's test has it,
# else the owner column of ls -ldn.
_hp_owned() {
  [ -O "$1" ] 2>/dev/null; _hp_o=$?
  [ "$_hp_o" -gt 1 ] || return "$_hp_o"
  [ "$(ls -ldn -- "$1" 2>/dev/null | awk '{ print $3 }')" = "$2" ]
}

# _hp_bounded LIMIT STDIN-TEXT COMMAND...: runs COMMAND (stdout and stderr together, stdin the
# text or /dev/null), prints its output, then a newline and its exit status. Past LIMIT seconds
# it is killed with SIGKILL (status 137), and its session with it when setsid made one; at the
# end the session is killed again, for anything the command left behind. No timeout(1): it may
# be missing, and BusyBox's kills the child only.
#
# The watcher (a sleep, then the kill) leads a session of its own too, so one SIGKILL to its
# group ends it and its sleep at once when the command ends first: a watcher that trapped TERM
# and waited for its sleep missed now and then a TERM that came just before its `wait` blocked,
# and kept the probe for the whole LIMIT. Without setsid (macOS, a trimmed host) that watcher is
# the one left, and only the command and its children (pkill -P) can be found: a grandchild that
# holds the output open keeps the probe waiting until the runner's own timeout. Either way
# nothing outlives this function while this shell lives.
#
# A watcher outlives this shell when the shell is killed (the link dropped): it still kills at
# the end of its sleep, by then maybe another process's pid and group (pids wrap quickly on a
# busy host). So it kills only the process it was started for: where /proc is, the command's
# start time (_hp_start) is read here, while the command is this shell's child and unreaped, so
# that its pid cannot name another process yet, and the watcher reads it again after its sleep
# and kills nothing when it changed or the process is gone. Without /proc it kills as before.
_hp_bounded() {
  _hp_lim=$1 _hp_in=$2; shift 2
  if [ -n "$_hp_in" ]; then
    $_hp_sid /bin/sh -c 'i=$1; shift; printf "%s\n" "$i" | "$@"' hostinv-probe "$_hp_in" "$@" 2>&1 &
  else
    $_hp_sid "$@" </dev/null 2>&1 &
  fi
  _hp_p=$!
  _hp_start; _hp_born=$_hp_st
  if [ -n "$_hp_sid" ]; then
    $_hp_sid /bin/sh -c '_hp_p=$2 _hp_born=$3; sleep "$1"
      if [ -n "$_hp_born" ]; then __START_TIME__; [ "$_hp_st" = "$_hp_born" ] || exit 0; fi
      kill -s KILL -- "-$_hp_p"; kill -s KILL "$_hp_p"' hostinv-watch "$_hp_lim" "$_hp_p" "$_hp_born" \
      </dev/null >/dev/null 2>&1 &
    _hp_w=$!
    wait "$_hp_p"; _hp_rc=$?
    # The watcher itself first: it may not have called setsid yet. Its sleep starts only after
    # that, in its group, and the group goes next.
    kill -s KILL "$_hp_w" 2>/dev/null; kill -s KILL -- "-$_hp_w" 2>/dev/null; wait "$_hp_w" 2>/dev/null
    kill -s KILL -- "-$_hp_p" 2>/dev/null
  else
    ( _hp_t=; trap '_hp_t=1' TERM
      sleep "$_hp_lim" </dev/null >/dev/null 2>&1 & _hp_s=$!
      [ -n "$_hp_t" ] || wait "$_hp_s"
      if [ -n "$_hp_t" ]; then kill "$_hp_s" 2>/dev/null; exit 0; fi
      if [ -n "$_hp_born" ]; then _hp_start; [ "$_hp_st" = "$_hp_born" ] || exit 0; fi
      pkill -KILL -P "$_hp_p" 2>/dev/null; kill -s KILL "$_hp_p" 2>/dev/null ) </dev/null >/dev/null 2>&1 &
    _hp_w=$!
    wait "$_hp_p"; _hp_rc=$?
    kill -TERM "$_hp_w" 2>/dev/null; wait "$_hp_w" 2>/dev/null
  fi
  printf '\n%s' "$_hp_rc"
}
# _hp_split OUTPUT: _hp_rc (the status line) and _hp_first, the first non-empty line before it
# that is not a runtime's warning (Node prints "(node:PID) [DEP0040] DeprecationWarning: ..." on
# stderr ahead of many agents' version), or else the first non-empty line.
_hp_split() {
  _hp_rc=${1##*"$_hp_nl"} _hp_b=${1%"$_hp_nl"*} _hp_first= _hp_any=
  while [ -n "$_hp_b" ] && [ -z "$_hp_first" ]; do
    _hp_l=${_hp_b%%"$_hp_nl"*}
    case $_hp_b in *"$_hp_nl"*) _hp_b=${_hp_b#*"$_hp_nl"} ;; *) _hp_b= ;; esac
    [ -n "$_hp_any" ] || _hp_any=$_hp_l
    case $_hp_l in ''|'(node:'*|*Warning:*|'(Use `node --trace-'*) ;; *) _hp_first=$_hp_l ;; esac
  done
  [ -n "$_hp_first" ] || _hp_first=$_hp_any
}

# A newline first: a login that printed its last words without one must not glue them to the header.
_hp_rep=$_hp_nl'__HEADER__'$_hp_nl

# What the kernel says in /proc costs no process; uname answers the rest. Each program a probe
# starts costs a host a few milliseconds, and a fleet check starts a probe on every host at once.
for _hp_k in os:-s:ostype arch:-m:arch kernel:-r:osrelease; do
  _hp_v= _hp_f=/proc/sys/kernel/${_hp_k##*:} _hp_k=${_hp_k%:*}
  [ -r "$_hp_f" ] && read -r _hp_v <"$_hp_f"
  [ -n "$_hp_v" ] || _hp_v=$(uname "${_hp_k#*:}" 2>/dev/null) || _hp_v=
  if [ -n "$_hp_v" ]; then _hp_put "${_hp_k%%:*}" "$_hp_v"; else _hp_unavailable "${_hp_k%%:*}"; fi
done

# Cores online: the kernel's list of ranges (0-3,8-11), as getconf reads it, else the tools.
_hp_from=online _hp_v=
if [ -r /sys/devices/system/cpu/online ] && read -r _hp_l </sys/devices/system/cpu/online; then
  _hp_v=0
  set -f; IFS=,
  for _hp_r in $_hp_l; do
    _hp_a=${_hp_r%%-*} _hp_b=${_hp_r#*-}
    if _hp_int "$_hp_a" && _hp_int "$_hp_b" && [ "$_hp_b" -ge "$_hp_a" ]; then
      _hp_v=$((_hp_v + _hp_b - _hp_a + 1))
    else _hp_v=; break; fi
  done
  unset IFS; set +f
  [ "${_hp_v:-0}" -gt 0 ] || _hp_v=
fi
if ! _hp_int "$_hp_v"; then _hp_from=getconf; _hp_v=$(getconf _NPROCESSORS_ONLN 2>/dev/null) || _hp_v=; fi
if ! _hp_int "$_hp_v"; then _hp_from=nproc; _hp_v=$(nproc 2>/dev/null) || _hp_v=; fi
if ! _hp_int "$_hp_v" && [ -r /proc/cpuinfo ]; then
  _hp_from=cpuinfo _hp_v=0
  while IFS= read -r _hp_l; do case $_hp_l in processor*) _hp_v=$((_hp_v + 1)) ;; esac; done </proc/cpuinfo
  [ "$_hp_v" -gt 0 ] || _hp_v=
fi
if _hp_int "$_hp_v"; then _hp_put cores "$_hp_v"; _hp_put cores_from "$_hp_from"; else _hp_unavailable cores; fi

if [ -r /proc/loadavg ] && read -r _hp_a _hp_b _hp_c _hp_r </proc/loadavg; then
  _hp_put load "$_hp_a $_hp_b $_hp_c"; _hp_put load_from loadavg
elif _hp_v=$(uptime 2>/dev/null) && case $_hp_v in *'load average'*) true ;; *) false ;; esac; then
  _hp_put load "${_hp_v##*load average*: }"; _hp_put load_from uptime
else
  _hp_unavailable load
fi

_hp_t= _hp_a=
if [ -r /proc/meminfo ]; then
  # The shell reads a byte at a time: stop at the two lines wanted (the third, since 3.14).
  while read -r _hp_k _hp_v _hp_r; do
    case $_hp_k in MemTotal:) _hp_t=$_hp_v ;; MemAvailable:) _hp_a=$_hp_v ;; esac
    [ -z "$_hp_t" ] || [ -z "$_hp_a" ] || break
  done </proc/meminfo
fi
if _hp_int "$_hp_t"; then _hp_put mem_total_kib "$_hp_t"; else _hp_unavailable mem_total; fi
if _hp_int "$_hp_a"; then _hp_put mem_available_kib "$_hp_a"; else _hp_unavailable mem_available; fi

# The workspace as the session's `cd --` sees it: relative to the login directory, no ~. A
# leading ./ keeps a name starting with - from reading as an option to test or df.
case $_hp_ws in ''|/*) _hp_wp=$_hp_ws ;; *) _hp_wp=./$_hp_ws ;; esac
if [ -z "$_hp_ws" ]; then _hp_put workspace unset; _hp_wp=.
elif [ -d "$_hp_wp" ]; then
  _hp_put workspace dir
  if [ -w "$_hp_wp" ] && [ -x "$_hp_wp" ]; then _hp_put workspace_writable yes; else _hp_put workspace_writable no; fi
elif [ -e "$_hp_wp" ] || [ -h "$_hp_wp" ]; then _hp_put workspace not_dir
else _hp_put workspace missing
fi
# Free space: the field before the capacity column (N%), on the last line, so that a line
# that df -k without -P wrapped after a long device name still reads right.
_hp_free=
if [ -d "$_hp_wp" ]; then
  _hp_flush
  _hp_v=$(df -Pk "$_hp_wp" 2>/dev/null) || _hp_v=$(df -k "$_hp_wp" 2>/dev/null) || _hp_v=
  set -f; set -- ${_hp_v##*"$_hp_nl"}; set +f
  _hp_prev=
  for _hp_f do case $_hp_f in *%) _hp_free=$_hp_prev; break ;; esac; _hp_prev=$_hp_f; done
  if _hp_int "$_hp_free"; then _hp_put disk_free_kib "$_hp_free"; else _hp_unavailable disk_free; fi
fi

_hp_put path "${PATH-}"
_hp_put shell "${SHELL-}"
if _hp_v=$(command -v "$_hp_prog" 2>/dev/null) && [ -n "$_hp_v" ]; then
  _hp_put agent found
  _hp_put agent_path "$_hp_v"
  case $_hp_v in */*) _hp_run=$_hp_v ;; *) _hp_run=$_hp_prog ;; esac
  if [ -n "$_hp_ver" ]; then
    _hp_flush
    _hp_split "$(_hp_bounded __VERSION_S__ '' "$_hp_run" --version)"
    if [ "$_hp_rc" = 137 ]; then _hp_put agent_run timeout; else _hp_put agent_run "exit:$_hp_rc"; fi
    [ -z "$_hp_first" ] || _hp_put agent_version "$_hp_first"
  else
    _hp_put agent_run skipped
  fi
else
  _hp_put agent missing
  case $_hp_prog in */*) _hp_login= ;; esac  # a path: PATH plays no part
  case $_hp_login in
    '') _hp_put login skipped ;;
    *)
      case ${SHELL-} in
        '') _hp_put login no_shell ;;
        *csh|*fish) _hp_lf=-l ;;
        *) _hp_lf='-i -l' ;;
      esac
      if [ -n "${SHELL-}" ] && [ ! -x "$SHELL" ]; then _hp_put login no_shell
      elif [ -n "${SHELL-}" ]; then
        # The marker is split by "" in what the shell reads: an interactive shell may echo that line.
        _hp_flush
        _hp_out=$(_hp_bounded __LOGIN_S__ 'echo __MARK_SPLIT__; printenv PATH; echo __MARK_SPLIT__' "$SHELL" $_hp_lf)
        _hp_split "$_hp_out"
        _hp_lp=${_hp_out#*__MARK__"$_hp_nl"}
        if [ "$_hp_lp" = "$_hp_out" ]; then
          if [ "$_hp_rc" = 137 ]; then _hp_put login timeout; else _hp_put login failed; fi
        else
          _hp_lp=${_hp_lp%%"$_hp_nl"*}
          [ "$_hp_lp" != __MARK__ ] || _hp_lp=
          _hp_put login_path "$_hp_lp"
          _hp_dir=
          set -f; IFS=:
          for _hp_d in $_hp_lp; do
            case $_hp_d in /*) ;; *) continue ;; esac
            if [ -f "$_hp_d/$_hp_prog" ] && [ -x "$_hp_d/$_hp_prog" ]; then _hp_dir=$_hp_d; break; fi
          done
          unset IFS; set +f  # sh starts with IFS unset: the default
          if [ -n "$_hp_dir" ]; then _hp_put login found; _hp_put login_dir "$_hp_dir"
          else _hp_put login missing; fi
        fi
      fi ;;
  esac
fi

# Agent slots held (see probe_script's slot_prefix): the slot files' inodes among the flock
# locks /proc/locks lists. Read only: a probe takes no lock and creates no directory. A slot
# directory that is a link, not a directory, or someone else's is unusable: no session can
# take a slot there (the session script refuses it).
if [ -n "$_hp_slotp" ]; then
  # The effective uid (as id -u prints it): the second of status's Uid fields.
  _hp_v=
  if [ -r /proc/self/status ]; then
    while read -r _hp_k _hp_a _hp_b _hp_r; do
      case $_hp_k in Uid:) _hp_v=$_hp_b; break ;; esac
    done </proc/self/status
  fi
  _hp_int "$_hp_v" || _hp_v=$(id -u 2>/dev/null) || _hp_v=
__SLOT_DIR__
  # Any flock lock at all (a "->" line is a waiter, not a holder): without one, nothing is held.
  # The shell reads a byte at a time, so past 256 lines of other locks awk decides instead.
  _hp_any= _hp_n=0
  if [ -r /proc/locks ]; then
    while read -r _hp_a _hp_k _hp_r; do
      _hp_n=$((_hp_n + 1))
      if [ "$_hp_k" = FLOCK ] || [ "$_hp_n" -gt 256 ]; then _hp_any=1; break; fi
    done </proc/locks
  fi
  if ! _hp_int "$_hp_v"; then _hp_unavailable slots
  elif [ -h "$_hp_sd" ] || { [ -e "$_hp_sd" ] && [ ! -d "$_hp_sd" ]; }; then
    _hp_put slots unusable; _hp_put slot_dir "$_hp_sd"
  elif [ ! -d "$_hp_sd" ]; then _hp_put slots_held 0
  elif ! _hp_owned "$_hp_sd" "$_hp_v"; then
    _hp_put slots unusable; _hp_put slot_dir "$_hp_sd"
  elif [ ! -r /proc/locks ]; then _hp_unavailable slots
  elif [ -z "$_hp_any" ]; then _hp_put slots_held 0
  else
    # A lock counts when its device and inode (major:minor:inode as /proc/locks writes them, in
    # hex) are a slot file's, from stat's decimal st_dev and inode: one program lists them all,
    # in the directory (so the names stay plain whatever its path holds). Without stat -c, ls's
    # inodes alone decide. No slot file: nothing is held, and nothing is run.
    _hp_v=$(cd -- "$_hp_sd" 2>/dev/null || exit 1
      set -- slot-*
      [ -e "$1" ] || [ -h "$1" ] || { echo 0; exit 0; }
      { stat -c '%d %i %n' -- "$@" 2>/dev/null || ls -i -- . 2>/dev/null; } | awk -v locks=/proc/locks '
        FILENAME != locks && NF == 3 && $3 ~ /^slot-[0-9]+$/ { dev = $1
          key[sprintf("%02x:%02x:%s", int(dev / 256) % 4096, dev % 256 + int(dev / 1048576) * 256, $2)] = 1 }
        FILENAME != locks && NF == 2 && $2 ~ /^slot-[0-9]+$/ { ino[$1] = 1 }
        FILENAME == locks && $2 == "FLOCK" { n = split($6, d, ":")
          if ((((d[1] ":" d[2] ":" d[n]) in key) || (d[n] in ino)) && !seen[d[n]]++) held++ }
        END { print held + 0 }' - /proc/locks 2>/dev/null) || _hp_v=
    if _hp_int "$_hp_v"; then _hp_put slots_held "$_hp_v"; else _hp_unavailable slots; fi
  fi
fi

_hp_put unavailable "$_hp_miss"
printf '%s%s\n' "$_hp_rep" '__END__'
"""


# Sets _hp_st to the start time of process $_hp_p (clock ticks since boot; a pid reused since
# has another), field 22 of /proc/PID/stat, read by shell builtins only (no process: each costs
# the host milliseconds). The command name, field 2, may hold anything, spaces, parentheses and
# line breaks included: the lines are joined, and everything up to the last ") " dropped, which
# leaves field 3 as $1. Empty when the file cannot be read; it clobbers the positional
# parameters, so it runs in a function or after they were saved. No single quote: the watcher
# runs it inside one.
_START_TIME: Final = (
    '_hp_st= _hp_l=; while IFS= read -r _hp_l; do _hp_st=$_hp_st$_hp_l; done 2>/dev/null <"/proc/$_hp_p/stat"; '
    '_hp_st=${_hp_st##*") "}; set -f; set -- $_hp_st; set +f; _hp_st=${20-}'
)

# What travels: the body without its comment lines (a fifth of its bytes), which every host
# would read, and its shell parse, for nothing.
_SHIPPED_BODY: Final = "\n".join(line for line in _BODY.splitlines() if not line.lstrip().startswith("#")) + "\n"


def _data_line(agent_program: str, workspace: str, login_lookup: bool, version_lookup: bool, slot_prefix: str) -> str:
    return data_line(
        "_hp_data",
        [
            f"_hp_prog={shlex.quote(agent_program)}",
            f"_hp_ws={shlex.quote(workspace)}",
            f"_hp_login={'1' if login_lookup else ''}",
            f"_hp_ver={'1' if version_lookup else ''}",
            f"_hp_slotp={shlex.quote(slot_prefix)}",
            "_hp_complete=1",
        ],
    )


def _slot_dir(slot_prefix: str) -> list[str]:
    """The lines that set ``_hp_sd`` to the slot directory, as the session script finds it."""
    if slot_prefix == PRIVATE:
        return slot_dir_lines(PRIVATE, out="_hp_sd", uid="_hp_v", scratch="_hp_sl")
    return ["_hp_sd=$_hp_slotp$_hp_v"]  # the prefix travels as data (any bytes)


def probe_script(
    agent_program: str,
    workspace: str,
    *,
    version_timeout_s: int = VERSION_TIMEOUT_S,
    login_timeout_s: int = LOGIN_TIMEOUT_S,
    login_lookup: bool = True,
    version_lookup: bool = True,
    slot_prefix: str = "",
) -> str:
    """The script ``/bin/sh`` reads on stdin (run as :data:`PROBE_COMMAND`), with the data in it.

    ``agent_program``: a name looked up on the PATH a session gets (that of the login shell run
    non-interactively by sshd, which runs ``/bin/sh``), or a path. ``workspace``: the directory a
    session would ``cd --`` into, relative to the login directory unless absolute, never
    expanded (no ``~``); ``""`` checks none. Both are data, whatever bytes they hold (a str
    with surrogate escapes travels as its original bytes). ``version_timeout_s`` bounds
    ``AGENT --version``, ``login_timeout_s`` the login shell asked for its PATH (profiles can be
    slow: nvm, conda); whole seconds, since ``sleep`` may take no fractions. ``login_lookup``:
    whether to ask the login shell at all when the agent is not on the session's PATH; it is the
    one thing a probe runs that the user's dotfiles control (a profile can start an ``ssh-agent``
    that outlives it in a session of its own), so a caller that must run nothing of theirs turns
    it off (the report then says ``login=skipped``). ``version_lookup``: whether to run ``AGENT
    --version`` at all; a caller about to start the agent anyway (a check with the handshake,
    whose ``initialize`` names the version) turns it off and saves the host a start of the agent's
    runtime (``agent_run=skipped``). ``slot_prefix``: where the sessions of a
    host keep their agent slots, less the user id (files ``slot-N`` locked with ``flock`` while
    an agent runs); the report counts those held (``slots_held``). ``""``: not asked.

    :raises ValueError: for an empty agent program, a NUL byte in either (no shell variable can
        hold one), or a bound that is not a whole number of seconds of at least 1.
    """
    if not agent_program:
        raise ValueError("the agent program must not be empty")
    if "\0" in agent_program or "\0" in workspace or "\0" in slot_prefix:
        raise ValueError("the agent program, the workspace and the slot prefix must not hold a NUL byte")
    for what, value in (("version_timeout_s", version_timeout_s), ("login_timeout_s", login_timeout_s)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{what} must be a whole number of seconds, at least 1")
    decode = (
        '_hp_d=$(printf \'%b.\' "$_hp_data") && eval "${_hp_d%.}" && [ "${_hp_complete-}" = 1 ] || '
        f"{{ echo 'hostinv-probe: the probe script did not arrive whole' >&2; exit {EXIT_DATA_INCOMPLETE}; }}"
    )
    body = (
        _SHIPPED_BODY.replace("__MAX__", str(MAX_VALUE_CHARS))
        .replace("__START_TIME__", _START_TIME)
        .replace("__VERSION_S__", str(version_timeout_s))
        .replace("__LOGIN_S__", str(login_timeout_s))
        .replace("__MARK_SPLIT__", _LOGIN_MARK.replace("-", '""-', 1))
        .replace("__MARK__", _LOGIN_MARK)
        .replace("__HEADER__", REPORT_HEADER)
        .replace("__END__", REPORT_END)
        .replace("__SLOT_DIR__", "\n".join("  " + line for line in _slot_dir(slot_prefix)))
    )
    return (
        "\n".join(
            [
                _data_line(agent_program, workspace, login_lookup, version_lookup, slot_prefix),
                decode,
                "unset _hp_data _hp_d _hp_complete",
            ]
        )
        + body
    )
