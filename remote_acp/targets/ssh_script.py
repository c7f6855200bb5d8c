"""The script the remote shell runs for a session: enter the workspace, import the carried
environment, start the agent and supervise it. Pure text, built by :func:`remote_script`.

See :mod:`remote_acp.targets.ssh` for the theory of operation and what the host needs.
"""

from __future__ import annotations

import re
import secrets
import shlex
from typing import TYPE_CHECKING, Final

from .launch import command_argv

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "EXIT_NO_ENVIRONMENT",
    "EXIT_NO_WORKSPACE",
    "SIGNAL_MARK",
    "WORKSPACE_MARK",
    "check_count",
    "env_preamble",
    "remote_script",
    "validate_env_names",
]

EXIT_NO_WORKSPACE: Final = 97
EXIT_NO_ENVIRONMENT: Final = 98
WORKSPACE_MARK: Final = "remote-acp: workspace unavailable:"
SIGNAL_MARK: Final = "remote-acp: the agent was killed by signal"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_RESERVED_PREFIX = "_RA_"  # any case: the supervisor's own variables are _ra_*
_PREAMBLE_BLOCK = 64  # pad the env preamble so its length on argv says little about the values
# Names the remote shell needs for itself: IFS splits the supervisor's words; PPID is how the
# watchdog knows the connection (dash lets it be assigned); bash refuses to assign its read-only
# ones (the import would fail); FUNCNEST, GLOBIGNORE and EXECIGNORE break the supervisor's
# functions, its /proc globs and its command lookup. PATH and HOME stay allowed.
_RESERVED_NAMES: Final = frozenset(
    {"IFS", "PPID", "UID", "EUID", "SHELLOPTS", "BASHOPTS", "BASH_VERSINFO", "FUNCNEST", "GLOBIGNORE", "EXECIGNORE"}
)


def check_count(what: str, value: object) -> None:
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


def env_preamble(values: Mapping[str, str]) -> bytes:
    """The bytes sent on stdin ahead of the protocol: shell assignments the remote side evaluates.

    A value that is not valid UTF-8 (a str holding surrogate escapes, as ``os.environ`` gives for
    undecodable bytes) travels as its original bytes.
    """
    exports = " ".join(f"{name}={shlex.quote(value)}" for name, value in values.items())
    body = (f"export {exports}; _RA_COMPLETE=1" if exports else "_RA_COMPLETE=1").encode("utf-8", "surrogateescape")
    padding = -(len(body) + 1) % _PREAMBLE_BLOCK
    return body + b" " * padding + b"\n"


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
_ra_marked() {
  grep -l -s -a "_RA_SESSION=__TOKEN__\." /proc/[0-9]*/environ 2>/dev/null | sed 's|^/proc/\([0-9]*\)/environ$|\1|'
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
__COMMAND__
} <&3 3<&- &
_ra_agent=$!
exec 3<&- 0</dev/null
trap '' PIPE  # a vanished client must not stop the cleanup below (the agent keeps its own)
(
  while _ra_ours; do
    _ra_stat "$_ra_shell"
    if [ -n "$_ra_pp" ] && [ "$_ra_pp" != "$_ra_parent" ]; then
      _ra_kill tree; exit 0
    fi
    sleep 1
  done
) >/dev/null 2>&1 &
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


def remote_script(
    workspace: str,
    command: str | Sequence[str],
    env_bytes: int = 0,
    *,
    kill_grace_s: int = 3,
    token: str | None = None,
) -> str:
    """The script the remote ``sh`` runs: enter the workspace, import the environment, supervise.

    A string command is a shell fragment the operator owns and goes verbatim; a list is quoted
    word by word. The workspace is single-quoted and entered with ``cd --``; when that fails the
    script exits :data:`EXIT_NO_WORKSPACE` with a marked message, and never runs the command.
    ``token`` (random by default; letters and digits) marks the agent's environment, so descendants
    that left its process group and lost their parent are still found (through ``/proc`` where it
    exists). Scripts running at the same time on one host need distinct tokens: a finished
    script's cleanup kills whatever carries its token.

    :raises ValueError: for a ``kill_grace_s`` that is not an integer of at least 1, or a token
        that is not made of ASCII letters and digits.
    """
    check_count("kill_grace_s", kill_grace_s)
    if token is not None and not (token.isascii() and token.isalnum()):
        raise ValueError("the session token must be ASCII letters and digits")
    if isinstance(command, str):
        fragment = command.strip()
    else:
        # exec: the agent itself is the supervised child, whichever sh runs the script (bash would
        # otherwise keep a subshell in between, which dies at the first SIGTERM).
        fragment = "exec " + shlex.join(command_argv(list(command)))
    where = shlex.quote(workspace)
    lines = [
        f"cd -- {where} 2>/dev/null || {{ printf '%s\\n' {shlex.quote(f'{WORKSPACE_MARK} {workspace}')} >&2; "
        f"exit {EXIT_NO_WORKSPACE}; }}",
    ]
    if env_bytes:
        lines += [
            "command -v dd >/dev/null 2>&1 || { echo 'remote-acp: dd is required on this host to receive "
            f"environment variables' >&2; exit {EXIT_NO_ENVIRONMENT}; }}",
            f"_RA_ENV=$(dd bs=1 count={env_bytes} 2>/dev/null) "
            '&& command eval "$_RA_ENV" && [ "${_RA_COMPLETE-}" = 1 ] '
            "|| { echo 'remote-acp: the environment sent on stdin did not arrive whole' >&2; "
            f"exit {EXIT_NO_ENVIRONMENT}; }}",
            "unset _RA_ENV _RA_COMPLETE",
        ]
    # The command goes in last, so placeholder-like words in it are never rewritten.
    supervise = (
        _SUPERVISE.replace("__GRACE__", str(kill_grace_s))
        .replace("__SIGNAL_MARK__", SIGNAL_MARK)
        .replace("__TOKEN__", token or secrets.token_hex(8))
        .replace("__COMMAND__", fragment)
    )
    return "\n".join(lines) + supervise
