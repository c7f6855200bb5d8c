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
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import shlex
import shutil
from dataclasses import dataclass, field
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
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_RESERVED_PREFIX = "_RA_"
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

    :raises ValueError: naming the offending entry by position (its text could be a secret).
    """
    for index, name in enumerate(names):
        if not _ENV_NAME.match(name) or name.startswith(_RESERVED_PREFIX):
            raise ValueError(f"ssh_pass_env entry {index} is not a valid environment variable name")
    return tuple(names)


def env_preamble(values: Mapping[str, str]) -> bytes:
    """The bytes sent on stdin ahead of the protocol: shell assignments the remote side evaluates."""
    exports = " ".join(f"{name}={shlex.quote(value)}" for name, value in values.items())
    body = f"export {exports}; _RA_COMPLETE=1" if exports else "_RA_COMPLETE=1"
    padding = -(len(body.encode()) + 1) % _PREAMBLE_BLOCK
    return (body + " " * padding + "\n").encode()


# The supervisor: POSIX sh, with ps, awk and (on Linux) /proc. A watchdog runs beside the agent
# and, once the connection is gone (our shell's parent, the per-connection sshd, changed), kills
# every process it has seen descend from the agent: SIGTERM, then SIGKILL after a grace period.
# When the agent exits by itself the shell closes its stdout at once (the client sees the end of
# stream), stops the watchdog and kills whatever the agent left behind the same way.
_SUPERVISE = r"""
_ra_tree() {
  ps -e -o pid= -o ppid= 2>/dev/null | awk -v root="$1" '
    { parent[$1] = $2 }
    END { for (p in parent) { q = p; n = 0
            while (q in parent && q != root && q > 1 && n < 64) { q = parent[q]; n++ }
            if (q == root && p != root) print p } }'
}
_ra_marked() {
  grep -l -s -a "_RA_SESSION=__TOKEN__\." /proc/[0-9]*/environ 2>/dev/null | sed 's|^/proc/\([0-9]*\)/environ$|\1|'
}
_ra_seen=""
_ra_note() { _ra_seen="$_ra_seen $(_ra_tree "$_ra_agent" | tr '\n' ' ') $(_ra_marked | tr '\n' ' ')"; }
_ra_kill() {
  _ra_note
  kill -TERM "$_ra_agent" $_ra_seen 2>/dev/null
  _ra_n=0
  while [ "$_ra_n" -lt __GRACE__ ]; do
    _ra_alive=""
    for _ra_q in "$_ra_agent" $_ra_seen; do kill -0 "$_ra_q" 2>/dev/null && _ra_alive=1; done
    [ -z "$_ra_alive" ] && return 0
    sleep 1; _ra_n=$((_ra_n + 1))
  done
  kill -KILL "$_ra_agent" $_ra_seen 2>/dev/null
}
_ra_parent=$PPID
_ra_shell=$$
exec 3<&0
{ export _RA_SESSION=__TOKEN__.
__COMMAND__
} <&3 3<&- &
_ra_agent=$!
exec 3<&- 0</dev/null
trap '' PIPE  # a vanished client must not stop the cleanup below (the agent keeps its own)
(
  while kill -0 "$_ra_agent" 2>/dev/null; do
    _ra_note
    _ra_now=$(ps -o ppid= -p "$_ra_shell" 2>/dev/null | tr -d ' ')
    if [ -n "$_ra_now" ] && [ "$_ra_now" != "$_ra_parent" ]; then
      _ra_kill; exit 0
    fi
    sleep 1
  done
) >/dev/null 2>&1 &
_ra_watch=$!
wait "$_ra_agent"
_ra_rc=$?
exec 1>/dev/null
kill "$_ra_watch" 2>/dev/null
_ra_seen=$(_ra_marked | tr '\n' ' ')
[ -n "$(echo $_ra_seen)" ] && _ra_kill
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
    ``token`` (random by default) marks the agent's environment, so descendants that left its
    process group and lost their parent are still found (through ``/proc`` where it exists).
    """
    if isinstance(command, str):
        fragment = command.strip()
    else:
        fragment = shlex.join(command_argv(list(command)))
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
    """``None``: ``accept-new``, unless the user's ssh_config sets a policy (then theirs wins)."""
    force_insecure_host_keys: bool = False
    """Required for the ``no`` policy, which connects even when a host key changed."""
    config_file: str | None = None
    """An explicit ssh_config (``-F``); by default ssh reads the user's ``~/.ssh/config``."""
    connect_timeout_s: int = 10
    server_alive_interval_s: int = 15
    server_alive_count_max: int = 3
    pass_env: tuple[str, ...] = ()
    """Names of local environment variables carried to the agent over stdin (never on argv)."""
    kill_grace_s: int = 3
    """On the host: how long the agent's tree gets after SIGTERM before SIGKILL."""

    def __post_init__(self) -> None:
        if self.host_key_policy == "no" and not self.force_insecure_host_keys:
            raise ValueError(
                "host key policy 'no' connects even to a host whose key changed; "
                "set force_insecure_host_keys to use it anyway"
            )
        for value, what in (
            (self.connect_timeout_s, "connect_timeout_s"),
            (self.server_alive_interval_s, "server_alive_interval_s"),
            (self.server_alive_count_max, "server_alive_count_max"),
            (self.kill_grace_s, "kill_grace_s"),
        ):
            if value < 1:
                raise ValueError(f"{what} must be at least 1")
        validate_env_names(self.pass_env)


def ssh_argv(
    ssh: str, destination: Destination, settings: SshSettings, remote: str, *, policy: str | None
) -> list[str]:
    """The local argv. ``policy`` is the StrictHostKeyChecking value to pass, or ``None`` to
    leave the user's own ssh_config in charge (OpenSSH keeps the first value it sees)."""
    argv = [ssh]
    if settings.config_file:
        argv += ["-F", settings.config_file]
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
    if policy is not None:
        argv += ["-o", f"StrictHostKeyChecking={policy}"]
    if destination.port is not None:
        argv += ["-p", str(destination.port)]
    argv += ["--", destination.host, f"exec sh -c {shlex.quote(remote)}"]
    return argv


@dataclass(frozen=True, slots=True)
class SshTarget:
    """Run the agent on ``host`` through the local ``ssh`` binary, one process per session."""

    host: str
    settings: SshSettings = field(default_factory=SshSettings)
    environ: Mapping[str, str] | None = None
    """Where ``pass_env`` values are read, and the local ssh's environment (default: ours)."""

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
        policy = await self._host_key_policy(ssh, destination, environ)
        return LaunchSpec(
            argv=ssh_argv(ssh, destination, self.settings, script, policy=policy),
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

    async def _host_key_policy(self, ssh: str, destination: Destination, environ: dict[str, str]) -> str | None:
        settings = self.settings
        if settings.host_key_policy is not None:
            if settings.host_key_policy == "no":
                log.warning(
                    "host key checking is off for this session: a changed host key will not stop it",
                    extra={"host": destination.label},
                )
            return settings.host_key_policy
        configured = await effective_host_key_policy(ssh, destination, settings.config_file, environ)
        if configured is None:
            return "accept-new"
        if configured in ("no", "off"):
            log.warning(
                "the ssh_config turns host key checking off for this host: a changed host key will not stop "
                "the session",
                extra={"host": destination.label},
            )
        return None

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


async def effective_host_key_policy(
    ssh: str, destination: Destination, config_file: str | None, environ: Mapping[str, str]
) -> str | None:
    """The StrictHostKeyChecking value the user's ssh_config sets for this host, if any.

    ``ssh -G`` prints the effective configuration without connecting; ``ask`` is OpenSSH's
    default and means nobody set it (under BatchMode it would act as ``yes``).
    """
    import subprocess

    import anyio

    argv = [ssh, *(["-F", config_file] if config_file else []), "-G"]
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
            return None if value in ("ask", "") else value
    return None
