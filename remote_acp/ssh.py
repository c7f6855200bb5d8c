"""The SSH launch target: the agent runs on a build host, through the local ``ssh`` binary.

One ``ssh`` process carries the whole session. Everything about how it is built is a pure
function of its inputs (:func:`parse_destination`, :func:`remote_script`, :func:`ssh_argv`,
:func:`env_preamble`), tested as data. The remote rules live here and nowhere else: a remote
launch delivers no tool servers and makes no measurement claim (:attr:`SshTarget.remote`), and
ssh's exit statuses are read by :meth:`SshTarget.exit_error`.

Theory of operation on the far side: the user's login shell runs ``sh -c SCRIPT``. The script
enters the workspace (a failing ``cd`` exits with its own status and message, and can never
run the command), imports the environment carried on stdin, then starts the agent in the
background with the session's stdin and supervises it: a watchdog notices when the connection
is gone (the shell's parent, the per-connection sshd, exits) and kills the agent's whole tree,
children that left its process group included, escalating from SIGTERM to SIGKILL. A plain
``ssh -T`` leaves such an agent running forever; ``-tt`` would corrupt the protocol.

What the host needs: a POSIX ``sh`` with ``kill``, ``sleep``, ``awk``, ``grep``, ``sed`` and
``cat``, and ``dd`` when environment variables are carried. On Linux the supervisor needs no
``ps`` (BusyBox's, which lacks ``-p``, would do anyway): it reads the shell's parent from
``/proc/$$/stat``, the agent's tree from ``/proc/*/stat``, and finds the processes carrying the
session's token in ``/proc/*/environ``, which catches descendants that left the agent's tree (a
daemon reparented to init). A host without ``/proc`` needs a ``ps`` that knows
``-e -o pid= -o ppid=`` and ``-o ppid= -p PID``, and ``tr``; there the tree is found through
parent links alone. Either way a descendant that both cleared its environment and lost its
parent chain to the agent is out of reach.

Host keys: an explicit :attr:`SshSettings.host_key_policy` goes on the command line, where it
wins over any ssh_config. Without one, ssh gets (``-F``) a small generated config that includes
the files ssh would have read (the explicit config file, else ``~/.ssh/config`` and
``/etc/ssh/ssh_config``) and then sets ``StrictHostKeyChecking accept-new`` for every host. OpenSSH
keeps the first value it obtains, so a policy the user's configuration sets explicitly, ``ask``
included, wins and ours is only the fallback (:func:`fallback_config_text`). The generated files
are kept, named by their content, under ``$REMOTE_ACP_CACHE_DIR/ssh`` (default: the platformdirs
user cache directory of ``remote-acp``).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import secrets
import shlex
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

from .errors import ErrorKind, RemoteAcpError
from .launch import LaunchSpec, command_argv
from .stderr_tail import secret_values

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from .process import ExitStatus

__all__ = [
    "Destination",
    "HostKeyPolicy",
    "SshSettings",
    "SshTarget",
    "env_preamble",
    "fallback_config_text",
    "parse_destination",
    "remote_script",
    "ssh_argv",
]

log = logging.getLogger("remote_acp.ssh")

HostKeyPolicy = Literal["accept-new", "yes", "no"]

EXIT_NO_WORKSPACE: Final = 97
EXIT_NO_ENVIRONMENT: Final = 98
SSH_FAILED: Final = 255
WORKSPACE_MARK: Final = "remote-acp: workspace unavailable:"
SIGNAL_MARK: Final = "remote-acp: the agent was killed by signal"
SYSTEM_SSH_CONFIG: Final = "/etc/ssh/ssh_config"
CACHE_DIR_VARIABLE: Final = "REMOTE_ACP_CACHE_DIR"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_RESERVED_PREFIX = "_RA_"  # any case: the supervisor's own variables are _ra_*
# Names the remote shell needs for itself: IFS splits the supervisor's words; PPID is how the
# watchdog knows the connection (dash lets it be assigned); bash refuses to assign its read-only
# ones (the import would fail); FUNCNEST, GLOBIGNORE and EXECIGNORE break the supervisor's
# functions, its /proc globs and its command lookup. PATH and HOME stay allowed.
_RESERVED_NAMES: Final = frozenset(
    {"IFS", "PPID", "UID", "EUID", "SHELLOPTS", "BASHOPTS", "BASH_VERSINFO", "FUNCNEST", "GLOBIGNORE", "EXECIGNORE"}
)
_NUMERIC_SETTINGS: Final = ("connect_timeout_s", "server_alive_interval_s", "server_alive_count_max", "kill_grace_s")
_POLICIES: Final = ("accept-new", "yes", "no")
# How `ssh -G` spells StrictHostKeyChecking values, read back as the policy names we use.
_SSH_G_SPELLING: Final = {"true": "yes", "false": "no", "off": "no"}
_PREAMBLE_BLOCK = 64  # pad the env preamble so its length on argv says little about the values


@dataclass(frozen=True, slots=True)
class Destination:
    """Where to connect: what ssh is given as the destination, and an explicit port if any."""

    host: str
    port: int | None = None

    @property
    def label(self) -> str:
        """The destination as a person would write it (and :func:`parse_destination` reads)."""
        if self.port is None:
            return self.host
        user, at, address = self.host.rpartition("@")
        if ":" in address:
            address = f"[{address}]"
        return f"{user}{at}{address}:{self.port}"


def parse_destination(text: str) -> Destination:
    """Parse ``alias``, ``user@host``, ``host:port``, ``[v6addr]:port`` or a bare IPv6 address.

    :raises RemoteAcpError: ``agent_not_found`` for an empty or unsafe destination (one starting
        with ``-`` could be read as an option).
    """
    host = text.strip()
    if not host or any(c.isspace() or not c.isprintable() for c in host):
        raise RemoteAcpError(ErrorKind.AGENT_NOT_FOUND, f"the ssh destination {text!r} is empty or contains blanks")
    user, at, rest = host.rpartition("@")
    port: int | None = None
    if rest.startswith("["):
        addr, bracket, tail = rest[1:].partition("]")
        if not bracket or (tail and not tail.startswith(":")):
            raise RemoteAcpError(ErrorKind.AGENT_NOT_FOUND, f"the ssh destination {text!r} is not well formed")
        rest, port_text = addr, tail[1:]
        port = _port(port_text, text) if tail else None
    elif rest.count(":") == 1:
        rest, port_text = rest.split(":")
        port = _port(port_text, text)
    if not rest or rest.startswith("-") or user.startswith("-"):
        raise RemoteAcpError(
            ErrorKind.AGENT_NOT_FOUND, f"the ssh destination {text!r} is refused: it would read as an option"
        )
    return Destination(f"{user}{at}{rest}", port)


def _port(text: str, whole: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 0 < int(text) < 65536:
        raise RemoteAcpError(ErrorKind.AGENT_NOT_FOUND, f"the ssh destination {whole!r} has an invalid port")
    return int(text)


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
    _check_count("kill_grace_s", kill_grace_s)
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


@dataclass(frozen=True, slots=True)
class SshSettings:
    """How ``ssh`` is run. Every field is also a ``remote-acp run`` flag."""

    host_key_policy: HostKeyPolicy | None = None
    """``None``: ``accept-new``, unless the ssh_config ssh reads sets a policy for the host, ``ask``
    included (then theirs wins). Set, it goes on the command line and wins over any ssh_config."""
    force_insecure_host_keys: bool = False
    """Required for the ``no`` policy, which connects even when a host key changed."""
    config_file: str | None = None
    """An explicit ssh_config, read instead of ``~/.ssh/config`` and ``/etc/ssh/ssh_config`` (as
    with ``ssh -F``; ``none`` reads no file)."""
    connect_timeout_s: int = 10
    server_alive_interval_s: int = 15
    server_alive_count_max: int = 3
    pass_env: tuple[str, ...] = ()
    """Names of local environment variables carried to the agent over stdin (never on argv)."""
    kill_grace_s: int = 3
    """On the host: how long the agent's tree gets after SIGTERM before SIGKILL."""

    def __post_init__(self) -> None:
        if self.host_key_policy is not None and self.host_key_policy not in _POLICIES:
            raise ValueError(f"host_key_policy must be one of {', '.join(_POLICIES)}")
        if self.host_key_policy == "no" and not self.force_insecure_host_keys:
            raise ValueError(
                "host key policy 'no' connects even to a host whose key changed; "
                "set force_insecure_host_keys to use it anyway"
            )
        if self.config_file is not None and (not self.config_file or any(c in self.config_file for c in "\r\n\0")):
            raise ValueError("config_file must be a non-empty path without line breaks")
        for what in _NUMERIC_SETTINGS:
            _check_count(what, getattr(self, what))
        validate_env_names(self.pass_env)


def _check_count(what: str, value: object) -> None:
    # bool is an int to Python, and a float would reach the remote shell's arithmetic as text.
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{what} must be an integer, not {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{what} must be at least 1")


def ssh_argv(
    ssh: str, destination: Destination, settings: SshSettings, remote: str, *, config: str | None
) -> list[str]:
    """The local argv. ``config`` is the file given to ``-F``: without a host-key policy in the
    settings, the generated fallback config (:func:`fallback_config_text`), which includes the
    user's own; with one, the settings' ``config_file``, and the policy goes on the command line.
    """
    argv = [ssh]
    if config is not None:
        argv += ["-F", config]
    argv += [
        "-T",
        "-e", "none",
        "-x",
        "-a",
        "-o", "BatchMode=yes",
        "-o", f"ConnectTimeout={settings.connect_timeout_s}",
        "-o", f"ServerAliveInterval={settings.server_alive_interval_s}",
        "-o", f"ServerAliveCountMax={settings.server_alive_count_max}",
        "-o", "LogLevel=ERROR",
    ]  # fmt: skip
    if settings.host_key_policy is not None:
        argv += ["-o", f"StrictHostKeyChecking={settings.host_key_policy}"]
    if destination.port is not None:
        argv += ["-p", str(destination.port)]
    argv += ["--", destination.host, f"exec sh -c {shlex.quote(remote)}"]
    return argv


@dataclass(frozen=True, slots=True)
class SshTarget:
    """Run the agent on ``host`` through the local ``ssh`` binary, one process per session."""

    host: str
    settings: SshSettings = field(default_factory=SshSettings)
    environ: Mapping[str, str] | None = field(default=None, repr=False)
    """Where ``pass_env`` values are read, and the local ssh's environment (default: ours). Kept
    out of the repr: it holds secrets."""

    @property
    def label(self) -> str:
        return parse_destination(self.host).label

    @property
    def remote(self) -> bool:
        # The remote rules: no tool servers cross to the host, and no measurement source can
        # read what the runtime writes there.
        return True

    async def prepare(self, command: str | Sequence[str], workspace: str) -> LaunchSpec:
        destination = parse_destination(self.host)
        if not workspace or not workspace.strip():
            raise RemoteAcpError(ErrorKind.INVALID_WORKSPACE_CWD, "the workspace path is empty")
        if not workspace.startswith("/"):
            raise RemoteAcpError(ErrorKind.INVALID_WORKSPACE_CWD, f"the workspace path {workspace!r} is not absolute")
        if isinstance(command, str):
            if not command.strip():
                raise RemoteAcpError(ErrorKind.AGENT_NOT_FOUND, "the agent command is empty or whitespace-only")
        else:
            command_argv(list(command))
        environ = dict(os.environ if self.environ is None else self.environ)
        ssh = shutil.which("ssh", path=environ.get("PATH", os.defpath))
        if ssh is None:
            raise RemoteAcpError(ErrorKind.AGENT_NOT_FOUND, "ssh binary not found on this host's PATH")
        carried = {}
        for name in self.settings.pass_env:
            if name not in environ:
                raise RemoteAcpError(
                    ErrorKind.AGENT_NOT_FOUND, f"ssh_pass_env names {name}, which is not set in the environment"
                )
            carried[name] = environ[name]
        preamble = env_preamble(carried) if carried else b""
        script = remote_script(workspace, command, len(preamble), kill_grace_s=self.settings.kill_grace_s)
        config = await self._ssh_config(ssh, destination, environ)
        return LaunchSpec(
            argv=ssh_argv(ssh, destination, self.settings, script, config=config),
            env=environ,
            cwd=None,
            target=destination.label,
            remote=True,
            stdin_prefix=preamble,
            # Carried values are masked too (above the length below which masking would
            # garble ordinary words), whatever their names.
            secrets=tuple(
                sorted({*secret_values(environ), *secret_values(carried, any_name=True)}, key=len, reverse=True)
            ),
        )

    async def _ssh_config(self, ssh: str, destination: Destination, environ: dict[str, str]) -> str | None:
        """What ``-F`` gets (see :func:`ssh_argv`), with the warnings about an insecure policy."""
        settings = self.settings
        config = ssh_config_file(settings)
        if settings.host_key_policy is not None:
            if settings.host_key_policy == "no":
                log.warning(
                    "host key checking is off for this session: a changed host key will not stop it",
                    extra={"host": destination.label},
                )
        elif await effective_host_key_policy(ssh, destination, config, environ) == "no":
            log.warning(
                "the ssh_config turns host key checking off for this host: a changed host key will not stop "
                "the session",
                extra={"host": destination.label},
            )
        return config

    def exit_error(self, status: ExitStatus, *, agent_wrote: bool, stderr: str) -> RemoteAcpError | None:
        if status.code == SSH_FAILED and not agent_wrote:
            return RemoteAcpError(ErrorKind.PORT_EXIT, "ssh connection failed", detail=stderr)
        if status.code == EXIT_NO_WORKSPACE and WORKSPACE_MARK in stderr:
            return RemoteAcpError(
                ErrorKind.INVALID_WORKSPACE_CWD,
                f"the workspace does not exist on {self.label} or cannot be entered",
                detail=stderr,
            )
        if status.code is not None and SIGNAL_MARK in stderr:
            return RemoteAcpError(
                ErrorKind.PORT_EXIT, f"the agent runtime on {self.label} was killed by a signal", detail=stderr
            )
        return None


def ssh_config_file(settings: SshSettings) -> str | None:
    """The file ``-F`` gets: with a host-key policy in the settings, their ``config_file``; without,
    the fallback config (:func:`fallback_config_text`), written under :func:`fallback_config_dir`.

    :raises RemoteAcpError: ``agent_not_found`` for an explicit config file that does not exist
        (the fallback would include nothing from it), or a cache directory that cannot be used.
    """
    config_file = settings.config_file
    if config_file is not None and config_file.lower() != "none":
        if not os.path.exists(config_file) or os.path.isdir(config_file):
            raise RemoteAcpError(ErrorKind.AGENT_NOT_FOUND, f"the ssh config file {config_file} does not exist")
    if settings.host_key_policy is not None:
        return config_file
    if config_file is not None and config_file.lower() != "none":
        config_file = os.path.abspath(config_file)  # Include would read a relative path under ~/.ssh
        if os.path.realpath(config_file) == os.devnull:
            config_file = "none"  # the same (and ssh refuses to include a world-writable file)
    return str(write_fallback_config(fallback_config_text(config_file, home=_login_home()), fallback_config_dir()))


def fallback_config_text(config_file: str | None, *, home: str) -> str:
    """The ssh_config given to ``-F`` when no host-key policy was chosen.

    It includes what ssh would read without us, in ssh's order (``config_file``, an absolute path,
    as ``ssh -F`` would; else ``HOME/.ssh/config`` and then ``/etc/ssh/ssh_config``; ``none``: no
    file), then sets ``StrictHostKeyChecking accept-new`` for every host. OpenSSH keeps the first
    value it obtains for an option, so a value the included files set for the host, ``ask``
    included, wins over ours; an included file that does not exist is skipped, as ssh skips it.
    ``home`` is the login's home directory (ssh finds ``~/.ssh/config`` there, whatever ``$HOME``
    says). Paths are quoted so that Include reads exactly that file (it would expand globs).
    """
    if config_file is None:
        included = [os.path.join(home, ".ssh", "config"), SYSTEM_SSH_CONFIG]
    elif config_file.lower() == "none":
        included = []
    else:
        included = [config_file]
    lines = [
        "# Written by remote-acp: the ssh_config ssh would read, then our default host-key policy.",
        *(f"Include {_config_word(path)}" for path in included),
        "Host *",
        "  StrictHostKeyChecking accept-new",
    ]
    return "\n".join(lines) + "\n"


def _config_word(path: str) -> str:
    # Two layers: Include expands globs (escape \ * ? [ for glob), and the ssh_config line parser
    # unquotes and unescapes (escape \ " ' for it, inside double quotes).
    if any(c in path for c in "\r\n\0"):
        raise ValueError("an ssh_config path cannot contain line breaks")
    globbed = re.sub(r"([\\*?\[])", r"\\\1", path)
    return '"' + re.sub(r"([\\\"'])", r"\\\1", globbed) + '"'


def _login_home() -> str:
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        return os.path.expanduser("~")


def fallback_config_dir() -> Path:
    """Where generated ssh_configs are kept: ``$REMOTE_ACP_CACHE_DIR/ssh``, else the platformdirs
    user cache directory's ``ssh``."""
    override = os.environ.get(CACHE_DIR_VARIABLE)
    if override:
        return Path(override) / "ssh"
    import platformdirs

    return platformdirs.user_cache_path("remote-acp") / "ssh"


def write_fallback_config(text: str, directory: Path) -> Path:
    """The file holding ``text`` in ``directory``, named by its content and written once, atomically.

    An existing file is used only when it holds exactly ``text``; the directory must be ours and
    writable by nobody else (ssh would run what a config file says).

    :raises RemoteAcpError: ``agent_not_found`` when the directory cannot be used.
    """
    data = os.fsencode(text)
    path = directory / f"config-{hashlib.sha256(data).hexdigest()[:32]}"
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = directory.stat()
        if info.st_uid != os.geteuid() or info.st_mode & 0o022:
            raise RemoteAcpError(
                ErrorKind.AGENT_NOT_FOUND,
                f"the directory {directory} is not private to this user: remote-acp keeps ssh configs there "
                f"(set {CACHE_DIR_VARIABLE} to another directory)",
            )
        try:
            if path.read_bytes() == data:
                return path
        except FileNotFoundError:
            pass
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=".config-")
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
    except OSError as exc:
        raise RemoteAcpError(
            ErrorKind.AGENT_NOT_FOUND,
            f"cannot write an ssh config under {directory}: {exc.strerror or exc} "
            f"(set {CACHE_DIR_VARIABLE} to a writable directory)",
        ) from None
    return path


async def effective_host_key_policy(
    ssh: str, destination: Destination, config: str | None, environ: Mapping[str, str]
) -> str | None:
    """The StrictHostKeyChecking value ssh would use for this host with ``-F config``, as one of
    ``accept-new``, ``yes``, ``no`` or ``ask``; ``None`` when ``ssh -G`` cannot tell.

    ``ssh -G`` prints the effective configuration without connecting, spelling ``yes`` as ``true``
    and ``no`` or ``off`` as ``false``. It cannot tell a value set explicitly from OpenSSH's default
    (``ask``), which is why our default travels as a fallback in the config file instead
    (:func:`fallback_config_text`): with that file, ``ask`` means the user's configuration set it.
    """
    import subprocess

    import anyio

    argv = [ssh, *(["-F", config] if config is not None else []), "-G"]
    if destination.port is not None:
        argv += ["-p", str(destination.port)]
    argv += ["--", destination.host]
    try:
        with anyio.fail_after(5):
            done = await anyio.run_process(argv, check=False, env=dict(environ), stdin=subprocess.DEVNULL)
    except (OSError, TimeoutError):
        return None
    if done.returncode != 0:
        return None  # ssh itself will report the problem, with its own words, on connect
    for line in done.stdout.decode(errors="replace").splitlines():
        key, _, value = line.partition(" ")
        if key == "stricthostkeychecking":
            value = value.strip().lower()
            return _SSH_G_SPELLING.get(value, value) or None
    return None
