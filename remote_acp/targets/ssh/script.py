"""The session's script: what ``/bin/sh`` runs on the host once the loader has read it whole.

How the script and its data travel (the fixed bootstrap line, the loader on stdin, the data line
no shell reads anything in) is :mod:`remote_acp.targets.ssh.loader`'s.

The script, in order: decode the data; run the preflight when the session has one (a script of
the caller's, in a subshell reading ``/dev/null``, whose output reaches the client ahead of the
ready marker, so the client can look at the host before the agent starts); enter the workspace
with ``cd --`` (a failure exits :data:`EXIT_NO_WORKSPACE` with :data:`WORKSPACE_MARK`, and never
runs the command); export the carried environment; find the supervisor's tools
(:data:`SUPERVISOR_TOOLS`), on the login's PATH and else in :data:`TOOL_FALLBACK_PATH`, for the
supervisor's own use only (the agent gets the PATH the login and the carried environment gave
it); a tool found nowhere exits :data:`EXIT_NO_TOOL` with :data:`TOOL_MARK` and its name. Then,
with a ready marker, it prints the marker line and reads one line, the go-ahead, from stdin: the
client sends it only once it saw the marker, so a session given up before (a login that hung
past the bound) reads end of file there and starts nothing (:data:`EXIT_NO_GO`). Then it starts
the agent and supervises it.

With a reattach window the agent does not run under this supervisor (whose end is the
connection's): after the go-ahead the script is the start step of :mod:`.relay.start`, which reads
the start request (the line after ``go``), starts the relay and is the first attachment. All
before the go-ahead is the same (the relay and agent inherit the workspace, environment and PATH),
with :data:`WINDOW_TOOLS` checked too; the session's directory is in the user's slot directory.

Capacity (when the session has one): before the ready marker the script takes one of the host's
agent slots, a lock (``flock``) on one of the files ``slot-1`` .. ``slot-N`` in the user's slot
directory (:data:`SLOT_DIR_PREFIX` and the user id), held on a descriptor that the script and
the agent keep open for the session's whole life. The kernel releases it when the last of them
exits, however it dies, so slots hold across controllers with no coordinator and never leak. Every
slot held: exit :data:`EXIT_AT_CAPACITY` with :data:`AT_CAPACITY_MARK`, nothing started. A
probe counts held slots read-only, from ``/proc/locks``. The slot lines are :mod:`hostinv.slots`'s.

See :mod:`remote_acp.targets.ssh.target` for the theory of operation of the supervisor and what the
host needs.
"""

from __future__ import annotations

import re
import secrets
import shlex
from typing import TYPE_CHECKING, Final

from hostinv.shell_data import PLAIN
from hostinv.slots import (
    AT_CAPACITY_MARK,
    EXIT_AT_CAPACITY,
    EXIT_NO_SLOTS,
    PRIVATE,
    SLOTS_MARK,
    own_slot_dir_lines,
    take_slot_lines,
)

from .loader import END_MARK, EXIT_INCOMPLETE, INCOMPLETE_MARK, data_line
from .relay.start import start_script

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "AT_CAPACITY_MARK",
    "EXIT_AT_CAPACITY",
    "EXIT_NO_SLOTS",
    "EXIT_NO_GO",
    "EXIT_NO_TOOL",
    "EXIT_NO_WORKSPACE",
    "SIGNAL_MARK",
    "SLOTS_MARK",
    "SLOT_DIR_PREFIX",
    "SLOT_TOOLS",
    "SUPERVISOR_TOOLS",
    "TOOL_FALLBACK_PATH",
    "TOOL_MARK",
    "WATCH_TRAP",
    "WINDOW_TOOLS",
    "WORKSPACE_MARK",
    "check_count",
    "check_login_options",
    "go_ahead_lines",
    "loader_check_line",
    "remote_script",
    "tool_lines",
    "validate_env_names",
]

EXIT_NO_GO: Final = 95
EXIT_NO_TOOL: Final = 96
EXIT_NO_WORKSPACE: Final = 97
WORKSPACE_MARK: Final = "remote-acp: workspace unavailable:"
SIGNAL_MARK: Final = "remote-acp: the agent was killed by signal"
TOOL_MARK: Final = "remote-acp: this host lacks a tool the session's supervisor needs:"
NO_GO_MARK: Final = "remote-acp: no go-ahead after the ready marker; nothing was started"
SLOT_DIR_PREFIX: Final = PRIVATE
"""Where sessions keep their agent slots by default: the user's own directory on the host
(:mod:`hostinv.slots`), never one another user could make first."""
SLOT_TOOLS: Final = ("flock", "id", "ls")
"""What taking a slot runs besides the supervisor's tools."""
SUPERVISOR_TOOLS: Final = ("awk", "grep", "sed", "cat", "sleep")
"""What the supervisor runs besides builtins (and ``ps``, ``tr`` on a host without ``/proc``)."""
WINDOW_TOOLS: Final = ("mkfifo", "dd", "wc", "tail", "mkdir", "mv", "rm")
"""What a reattach window's steps run besides the supervisor's and the slots' tools (``setsid``
and ``sha256sum`` where they are; ``/bin/sh`` runs the relay)."""
TOOL_FALLBACK_PATH: Final = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
"""Where the supervisor looks for its tools after the login's PATH."""
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_RESERVED_PREFIX = "_RA_"  # any case: the supervisor's own variables are _ra_*
# Names the remote shell needs for itself: IFS splits the supervisor's words; PPID is how the
# watchdog knows the connection (dash lets it be assigned); bash refuses to assign its read-only
# ones (the import would fail); FUNCNEST, GLOBIGNORE and EXECIGNORE break the supervisor's
# functions, its /proc globs and its command lookup. PATH and HOME stay allowed.
_RESERVED_NAMES: Final = frozenset(
    {"IFS", "PPID", "UID", "EUID", "SHELLOPTS", "BASHOPTS", "BASH_VERSINFO", "FUNCNEST", "GLOBIGNORE", "EXECIGNORE"}
)


def check_count(what: str, value: object) -> None:
    """Refuse a ``value`` for ``what`` that is not an integer of at least 1.

    :raises ValueError: naming ``what``.
    """
    # bool is an int to Python, and a float would reach the remote shell's arithmetic as text.
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{what} must be an integer, not {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{what} must be at least 1")


def validate_env_names(names: Sequence[str]) -> tuple[str, ...]:
    """The names, if each is a valid shell variable name we may set.

    Refused besides: names starting with ``_RA_`` in any case (ours), and the few the remote shell
    needs for itself (``IFS``, ``PPID``, bash's read-only ones...; ``PATH`` and ``HOME`` are allowed).

    :raises ValueError: naming the offending entry by position (its text could be a secret).
    """
    for index, name in enumerate(names):
        if not isinstance(name, str) or not _ENV_NAME.match(name) or name.upper().startswith(_RESERVED_PREFIX):
            raise ValueError(f"ssh_pass_env entry {index} is not a valid environment variable name")
        if name in _RESERVED_NAMES:
            raise ValueError(f"ssh_pass_env entry {index} names a variable the remote shell needs for itself")
    return tuple(names)


def _q(text: str) -> str:
    return shlex.quote(text)


WATCH_TRAP: Final = '[ "$!" = "$_ra_agent" ] || kill -s KILL "$!" 2>/dev/null; exit 0'
"""The watchdog's TERM trap: its newest ``sleep`` goes with it. ``$!`` names that sleep from the
moment ``sleep 1 &`` ran, so a TERM that comes before the script could note the pid anywhere
still finds it; and SIGKILL, because a child not yet past its ``exec`` still runs the shell's
handler, which would take a TERM and lose it in the ``exec``. Either way the old trap left that
sleep behind for a second. Before the first sleep, ``$!`` is still the main shell's last job,
the agent, already reaped: left alone."""

# Where the session's token may be, read from /proc by awk (_ra_since, on Linux): the processes
# that a full scan of /proc/*/environ would have to read, narrowed without reading every process.
# A descendant of the agent is, at any moment, in the subtree of a child of one of this awk's
# ancestors (itself, the subshells above it, the script's shell, the per-connection sshd... up to
# init): while its chain to the agent holds, under the shell; once a parent died, re-parented by
# the kernel to a subreaper among the dying parent's ancestors or to init, which are ancestors of
# ours too (or descendants of the agent, walked anyway). Such a subtree's root started no earlier
# than the script's shell. So: the children of every ancestor (the watchdog's pid, `skip`, and
# the chain itself left out) that started at or after the shell, and every descendant of those,
# printed one pid a line; the ancestors' children are read again until a reading finds none new,
# so a process re-parented while the subtrees were walked is not missed. "ALL" where that cannot
# be told (a file unreadable, as under hidepid or without CONFIG_PROC_CHILDREN, or a process with
# more than one thread, whose other threads' children this cannot list): then every environ is
# read, as before. Nothing printed: nothing can carry the token, and no environ is read at all.
_SINCE: Final = r"""
function st(p,   f, line, r) {
  f = "/proc/" p "/stat"; line = ""
  r = (getline line < f); close(f)
  if (r <= 0) return 0
  ID = line; sub(/ .*/, "", ID)
  sub(/.*\) /, "", line)
  return split(line, F, " ") >= 20
}
function kids(p,   f, line, r) {
  f = "/proc/" p "/task/" p "/children"; line = ""
  r = (getline line < f); close(f)
  if (r < 0) return -1
  return split(line, K, " ")
}
BEGIN {
  p = "self"; n = 0; t = ""
  while (n < 4096) {
    if (!st(p)) { print "ALL"; exit }
    p = ID; chain[p] = 1; up[++n] = p
    if (p == shell) t = F[20] + 0
    if (F[1] == "Z" && F[18] > 1) { print "ALL"; exit }
    if (F[2] + 0 < 1) break
    p = F[2]
  }
  if (t == "") { print "ALL"; exit }
  q = 0; i = 1
  for (round = 1; round <= 4; round++) {
    fresh = 0
    for (u = 1; u <= n; u++) {
      c = kids(up[u])
      if (c < 0) { print "ALL"; exit }
      for (j = 1; j <= c; j++) {
        k = K[j]
        if (!(k in chain) && k != skip && !(k in seen)) { seen[k] = 1; todo[++q] = k; fresh++ }
      }
    }
    if (!fresh) exit
    for (; i <= q; i++) {
      p = todo[i]
      if (!st(p) || (F[1] == "Z" && F[18] <= 1)) continue
      if (!(p in below) && F[20] + 0 < t) continue
      if (F[1] == "Z" || F[18] > 1) { print "ALL"; exit }
      print p
      c = kids(p)
      if (c < 0) { print "ALL"; exit }
      for (j = 1; j <= c; j++) {
        k = K[j]
        if (!(k in seen)) { seen[k] = 1; below[k] = 1; todo[++q] = k }
      }
    }
  }
  print "ALL"
}
"""
# The supervisor: POSIX sh, with awk, grep, sed and /proc on Linux (ps elsewhere). A watchdog
# runs beside the agent and, once the connection is gone (our shell's parent, the per-connection
# sshd, changed), kills the agent's tree: SIGTERM, then SIGKILL after a grace period. When the
# agent exits by itself the shell closes its stdout at once (the client sees the end of stream),
# stops the watchdog and kills whatever the agent left behind the same way.
#
# What gets signalled is computed at the moment of signalling, never remembered: the agent while
# it is still our shell's child (so never after `wait` reaped it, when its PID may be reused), the
# processes carrying the session token in their environment (descendants that left the tree and
# lost their parent, on Linux), and the live descendants of both. PIDs seen earlier may belong
# to unrelated processes by now. The agent is signalled last: its death ends the
# watchdog (the shell stops it), so everything else must have had its signal by then.
_SUPERVISE = r"""
if [ -r "/proc/$$/stat" ]; then _ra_proc=1; else _ra_proc=; fi
_ra_stat() {
  _ra_st= _ra_pp=
  if [ -n "$_ra_proc" ]; then
    _ra_s=
    { read -r _ra_s <"/proc/$1/stat"; } 2>/dev/null
    _ra_s=${_ra_s##*) }
    set -- $_ra_s
    _ra_st=${1-} _ra_pp=${2-}
  else
    _ra_pp=$(ps -o ppid= -p "$1" 2>/dev/null | tr -d ' ')
    [ -n "$_ra_pp" ] || { kill -0 "$1" 2>/dev/null && _ra_st=R; }
  fi
}
_ra_ours() {
  _ra_stat "$_ra_agent"
  if [ -n "$_ra_pp" ]; then [ "$_ra_pp" = "$_ra_shell" ] && [ "$_ra_st" != Z ]; else [ "$_ra_st" = R ]; fi
}
_ra_tree() {
  { if [ -n "$_ra_proc" ]; then
      cat /proc/[0-9]*/stat 2>/dev/null | sed -n 's/^\([0-9][0-9]*\) .*) \([A-Za-z]\) \([0-9][0-9]*\) .*/\1 \3 \2/p'
    else
      ps -e -o pid= -o ppid= 2>/dev/null
    fi; } | awk -v roots="$*" '
    BEGIN { n = split(roots, r, " "); for (i = 1; i <= n; i++) root[r[i]] = 1 }
    $3 != "Z" { parent[$1] = $2 }
    END { for (p in parent) { q = p; n = 0
            while (!(q in root) && (q in parent) && q > 1 && n < 64) { q = parent[q]; n++ }
            if (q in root) print p } }'
}
_ra_since() {
  awk -v shell="$_ra_shell" -v skip="${_ra_watch-}" '__SINCE__'
}
_ra_marked() {
  set -- /proc/[0-9]*/environ
  if [ -n "$_ra_proc" ]; then
    _ra_c=$(_ra_since 2>/dev/null) || _ra_c=ALL
    [ -n "$_ra_c" ] || return 0
    case $_ra_c in
      *ALL*) ;;
      *) set --; for _ra_p in $_ra_c; do set -- "$@" "/proc/$_ra_p/environ"; done ;;
    esac
  fi
  for _ra_f in $(grep -l -s -a "_RA_SESSION=__TOKEN__\." "$@" 2>/dev/null); do
    _ra_f=${_ra_f#/proc/}; echo "${_ra_f%/environ}"
  done
}
_ra_targets() {
  if [ "$1" = tree ] && _ra_ours; then _ra_a=$_ra_agent; else _ra_a=; fi
  _ra_r=$(_ra_marked)
  [ -n "$_ra_a$_ra_r" ] || return 0
  _ra_tree $_ra_a $_ra_r | awk -v a="$_ra_a" '$1 != a && !seen[$1]++ { print $1 } END { if (a != "") print a }'
}
_ra_kill() {
  _ra_set=$(_ra_targets "$1")
  [ -n "$_ra_set" ] || return 0
  kill -TERM $_ra_set 2>/dev/null
  _ra_n=0
  while [ "$_ra_n" -lt __GRACE__ ]; do
    sleep 1; _ra_n=$((_ra_n + 1))
    _ra_set=$(_ra_targets "$1")
    [ -n "$_ra_set" ] || return 0
  done
  kill -KILL $_ra_set 2>/dev/null
}
_ra_shell=$$
_ra_stat "$_ra_shell"
_ra_parent=${_ra_pp:-$PPID}
exec 3<&0
{ export _RA_SESSION=__TOKEN__.
  if [ -n "$_ra_had_path" ]; then PATH=$_ra_path; else unset PATH; fi
  if [ -n "$_ra_list" ]; then exec "$@"; fi
  eval "$_ra_cmd"
} <&3 3<&- &
_ra_agent=$!
exec 3<&- 0</dev/null
trap '' PIPE  # a vanished client must not stop the cleanup below (the agent keeps its own)
(
  # Stopped by the script once the agent ended: its pending `sleep` goes with it, not later.
  # It holds no agent slot (descriptor 9): it outlives the script by a moment, and a session
  # started in that moment would find the slot still held.
  trap '__WATCH_TRAP__' TERM
  while _ra_ours; do
    _ra_stat "$_ra_shell"
    if [ -n "$_ra_pp" ] && [ "$_ra_pp" != "$_ra_parent" ]; then
      _ra_kill tree; exit 0
    fi
    sleep 1 &
    wait "$!"
  done
) >/dev/null 2>&1 9>&- &
_ra_watch=$!
wait "$_ra_agent"
_ra_rc=$?
exec 1>/dev/null
kill "$_ra_watch" 2>/dev/null
_ra_kill reaped
if [ "$_ra_rc" -gt 128 ] && [ "$_ra_rc" -lt 160 ]; then
  echo "__SIGNAL_MARK__ $((_ra_rc - 128))" >&2
fi
exit "$_ra_rc"
"""


# What travels: the supervisor without its comment lines, which every host would read for nothing.
_SHIPPED_SUPERVISE: Final = (
    "\n".join(line for line in _SUPERVISE.splitlines() if not line.lstrip().startswith("#")) + "\n"
)


def remote_script(
    workspace: str,
    command: str | Sequence[str],
    env: Mapping[str, str] | None = None,
    *,
    kill_grace_s: int = 3,
    token: str | None = None,
    ready_marker: str | None = None,
    tool_path: str = TOOL_FALLBACK_PATH,
    capacity: int | None = None,
    slot_prefix: str = SLOT_DIR_PREFIX,
    preflight: str | None = None,
    reattach_window_s: int | None = None,
) -> str:
    """The script ``/bin/sh`` runs on the host (see the module docstring); it travels on stdin
    (:func:`stdin_prefix`), and holds the data (:func:`data_line`).

    A string command is a shell fragment the operator owns, run by ``/bin/sh`` (``eval``; with a
    window, ``/bin/sh -c``); a list is run word by word (``exec "$@"``). ``env``: the variables
    carried to the agent. ``token`` (random by default; letters and digits) marks the agent's
    environment, so descendants that left its process group and lost their parent are still
    found (through ``/proc`` where it exists). Scripts running at the same time on one host need
    distinct tokens: a finished script's cleanup kills whatever carries its token.
    ``ready_marker``: printed on a line of its own once the script is ready, after which one line
    (``go``) is read before the agent starts; ``None``: neither. ``tool_path``: where the
    supervisor's tools are looked for after the login's PATH. ``capacity``: take one of the
    host's first ``capacity`` agent slots before the agent starts (see the module docstring);
    ``None``: take none. ``slot_prefix``: the slot directory, less the user id (tests point it
    elsewhere). ``preflight``: POSIX sh run in a subshell (stdin ``/dev/null``) before the
    workspace is entered; what it prints on stdout reaches the client before the ready marker
    (requires one). ASCII, since the script is. ``reattach_window_s``: run the agent under a
    relay that keeps it that many seconds with no link (requires a ready marker; the relay marks
    the agent with the start request's session id, not ``token``).

    :raises ValueError: for a ``kill_grace_s``, ``capacity`` or ``reattach_window_s`` that is not
        an integer of at least 1, a token or marker that is not made of ASCII letters, digits and
        ``-``, a tool path with a quote or a line break, a slot prefix that is not a plain
        absolute path, or a window without a ready marker.
    """
    check_count("kill_grace_s", kill_grace_s)
    if capacity is not None:
        check_count("capacity", capacity)
    if token is not None and not (token.isascii() and token.isalnum()):
        raise ValueError("the session token must be ASCII letters and digits")
    check_login_options(ready_marker=ready_marker, tool_path=tool_path, slot_prefix=slot_prefix)
    if preflight is not None and (ready_marker is None or not preflight.isascii()):
        raise ValueError("a preflight needs a ready marker, and must be ASCII")
    if reattach_window_s is not None:
        check_count("reattach_window_s", reattach_window_s)
        if ready_marker is None:
            raise ValueError("a reattach window needs a ready marker (the start request follows the go-ahead)")
    incomplete = f"{{ printf '%s\\n' {_q(INCOMPLETE_MARK)} >&2; exit {EXIT_INCOMPLETE}; }}"
    tools = SUPERVISOR_TOOLS + (SLOT_TOOLS if capacity is not None or reattach_window_s is not None else ())
    lines = [
        loader_check_line(),
        data_line(workspace, command, env),
        f'_ra_d=$(printf \'%b.\' "$_ra_data") && eval "${{_ra_d%.}}" && [ "${{_ra_complete-}}" = 1 ] || {incomplete}',
        "unset _ra_data _ra_d _ra_complete",
        *(["(", preflight.rstrip("\n"), ") </dev/null"] if preflight is not None else []),
        # Why it cannot be entered, in one word the client reads: missing, not_dir or denied.
        f'cd -- "$_ra_ws" 2>/dev/null || {{ _ra_why=denied; [ -d "$_ra_ws" ] || _ra_why=not_dir; '
        f'[ -e "$_ra_ws" ] || _ra_why=missing; printf \'%s %s %s\\n\' {_q(WORKSPACE_MARK)} "$_ra_why" "$_ra_ws" >&2; '
        f"exit {EXIT_NO_WORKSPACE}; }}",
        f'if [ -n "$_ra_env" ]; then eval "$_ra_env" || {incomplete}; fi',
        *tool_lines(tools + (WINDOW_TOOLS if reattach_window_s is not None else ()), tool_path),
    ]
    if reattach_window_s is not None:
        assert ready_marker is not None
        lines += own_slot_dir_lines(slot_prefix, out="_ra_base", scratch="_ra_sl")
        if capacity is not None:
            lines += take_slot_lines(capacity, directory="_ra_base", counter="_ra_k")
        # A fragment runs under /bin/sh as the relay's child: the relay's own variables stay its own.
        lines += [*go_ahead_lines(ready_marker), '[ -n "$_ra_list" ] || set -- /bin/sh -c "$_ra_cmd"']
        # The slot, if any, is on descriptor 9 already: the start step takes none and hands it on.
        start = start_script(None, window_s=reattach_window_s, capacity=None, grace_s=kill_grace_s)
        return "\n".join(lines) + "\n" + start + END_MARK + "\n"
    if capacity is not None:
        lines += [
            *own_slot_dir_lines(slot_prefix, out="_ra_sd", scratch="_ra_sl"),
            *take_slot_lines(capacity, directory="_ra_sd", counter="_ra_k"),
            "unset _ra_sd",
        ]
    if ready_marker is not None:
        lines += go_ahead_lines(ready_marker)
    supervise = (
        _SHIPPED_SUPERVISE.replace("__SINCE__", _SINCE.strip("\n"))
        .replace("__WATCH_TRAP__", WATCH_TRAP)
        .replace("__GRACE__", str(kill_grace_s))
        .replace("__SIGNAL_MARK__", SIGNAL_MARK)
        .replace("__TOKEN__", token or secrets.token_hex(8))
    )
    return "\n".join(lines) + supervise + END_MARK + "\n"


# -- the pieces a reconnect's login shares (relay.login) ---------------------------------------


def check_login_options(*, ready_marker: str | None, tool_path: str, slot_prefix: str) -> None:
    """Refuse a marker, tool path or slot prefix a script cannot carry as it is.

    :raises ValueError: naming which.
    """
    if ready_marker is not None and not (
        ready_marker and ready_marker.replace("-", "").isalnum() and ready_marker.isascii()
    ):
        raise ValueError("the ready marker must be ASCII letters, digits and dashes")
    if any(c in tool_path for c in "'\\\n"):
        raise ValueError("the tool path must not hold quotes, backslashes or line breaks")
    if slot_prefix != PRIVATE and (not slot_prefix.startswith("/") or not set(slot_prefix.encode()) <= PLAIN):
        raise ValueError("the slot prefix must be an absolute path of letters, digits and /._,:+=@%-")


def loader_check_line() -> str:
    """A script's first line: the bootstrap's own variable holds this line only when it read the
    line itself, that is when a login script ate the loader line off stdin."""
    incomplete = f"{{ printf '%s\\n' {_q(INCOMPLETE_MARK)} >&2; exit {EXIT_INCOMPLETE}; }}"
    return f"_ra_first=1; case ${{l-}} in _ra_first=1*) {incomplete} ;; esac"


def tool_lines(tools: Sequence[str], tool_path: str) -> list[str]:
    """Find ``tools`` on the login's PATH, then in ``tool_path``; exit :data:`EXIT_NO_TOOL` with
    :data:`TOOL_MARK` naming the first found nowhere. The login's PATH is kept in ``_ra_path``
    (``_ra_had_path`` empty when it was unset) for the agent."""
    return [
        # The agent's PATH is the login's (and the carried one); the supervisor's own lookups
        # fall back to the usual places, so a PATH a dotfile trimmed cannot leave it toolless.
        "_ra_had_path=${PATH+1} _ra_path=${PATH-}",
        f"PATH=${{PATH:+$PATH:}}{_q(tool_path)}",
        f"_ra_tools='{' '.join(tools)}'",
        '[ -r "/proc/$$/stat" ] || _ra_tools="$_ra_tools ps tr"',
        "for _ra_t in $_ra_tools; do",
        '  command -v "$_ra_t" >/dev/null 2>&1 || '
        f"{{ printf '%s %s\\n' {_q(TOOL_MARK)} \"$_ra_t\" >&2; exit {EXIT_NO_TOOL}; }}",
        "done",
    ]


def go_ahead_lines(ready_marker: str) -> list[str]:
    """Print the marker on a line of its own, then read the go-ahead (``go``) or exit
    :data:`EXIT_NO_GO`."""
    return [
        f"printf '%s\\n' {ready_marker}",
        f"IFS= read -r _ra_go && [ \"$_ra_go\" = go ] || {{ printf '%s\\n' {_q(NO_GO_MARK)} >&2; exit {EXIT_NO_GO}; }}",
    ]
