"""The SSH launch target: the agent runs on a build host, through the local ``ssh`` binary.

One ``ssh`` process carries the whole session. Everything about how it is built is a pure
function of its inputs (:func:`parse_destination`, :func:`remote_script`, :func:`stdin_prefix`,
:func:`ssh_argv`, :func:`~remote_acp.targets.ssh.argv.ready_bound_ms`), tested as data. The
remote rules live here and nowhere else: a remote launch delivers no tool servers and makes no
measurement claim (:attr:`SshTarget.remote`), and ssh's exit statuses are read by
:meth:`SshTarget.exit_error`.

Theory of operation on the far side (:mod:`remote_acp.targets.ssh.loader` and
:mod:`remote_acp.targets.ssh.script` have the details): the user's login shell, whichever it is,
gets a fixed line with no data in it, which starts ``/bin/sh -c`` on
:data:`~remote_acp.targets.ssh.loader.BOOTSTRAP`; that reads the script from stdin,
ahead of the protocol, with the workspace, the command and the carried environment encoded in it
so that no shell reads them as code. The script enters the workspace (a failing ``cd`` exits
with its own status and message, and can never run the command), imports the environment, checks
the supervisor's tools, prints a per-session ready marker and waits for the client's go-ahead
line (the spec's :class:`~remote_acp.targets.ssh.ready_marker.ReadyMarker` prelude, which the
connection runs before the protocol): nothing but that prefix is sent before the marker (so a
login script that reads stdin or prints cannot eat or garble the protocol, and a login that takes
longer than
:func:`~remote_acp.targets.ssh.argv.ready_bound_ms` ends the session with a message naming the
likely cause), and an agent is never started for a session the client gave up. Then it starts
the agent in the background with the session's stdin and supervises it: a watchdog notices when
the connection is gone (the shell's parent, the per-connection sshd, exits) and kills the
agent's whole tree, children that left its process group included, escalating from SIGTERM to
SIGKILL. A plain ``ssh -T`` leaves such an agent running forever; ``-tt`` would corrupt the
protocol.

What the host needs: ``/bin/sh`` (POSIX) with the builtins ``read``, ``printf``, ``eval`` and
``kill``; and ``awk``, ``grep``, ``sed``, ``cat`` and ``sleep`` for the supervisor, looked for
on the login's PATH and then in the usual directories
(:data:`~remote_acp.targets.ssh.script.TOOL_FALLBACK_PATH`), for the supervisor only: the agent
gets the PATH the login (and the carried environment) gave it. A host without one fails the
start before the agent runs, naming the tool. On Linux the supervisor needs no ``ps``
(BusyBox's, which lacks ``-p``, would do anyway): it reads the shell's parent from
``/proc/$$/stat``, the agent's tree from ``/proc/*/stat``, and finds the processes carrying the
session's token in ``/proc/*/environ``, which catches descendants that left the agent's tree (a
daemon reparented to init), reading only those that can carry it: the processes started since
the session under its shell's ancestors, which is where the kernel re-parents a descendant that
lost its parent; every environ where that cannot be told. A host without ``/proc`` needs a
``ps`` that knows ``-e -o pid= -o ppid=`` and ``-o ppid= -p PID``, and ``tr``; there the tree is
found through parent links alone.
Either way a descendant that both cleared its environment and lost its parent chain to the agent
is out of reach.

Connection sharing: none. A session's ssh never uses a ControlMaster the user's configuration
sets up, and never becomes one: ``-o ControlMaster=no -o ControlPath=none`` on the command line,
where they win over any ssh_config, and the same two settings at the head of the generated
config (below), for the ssh a ``ProxyJump`` hop runs, which reads our ``-F`` file but not our
command line. A mux client hands its pipes to the master, so our teardown, which ends whatever
holds the agent's pipes, would kill the user's master and every other session riding on it; and
a master we started would outlive the session. A session lasts long enough that the saved
handshake (about 0.3 s) does not pay for that.

Concurrent starts: sshd refuses handshakes beyond its ``MaxStartups``, so at most
:attr:`SshSettings.max_concurrent_starts` sessions per host start at once in this process
(:meth:`SshTarget.start_slot`, :mod:`remote_acp.targets.ssh.start_slots`).

Host keys: an explicit :attr:`SshSettings.host_key_policy` of ``yes`` (a tightening) or ``no``
(the operator's forced choice) goes on the command line, where it wins over any ssh_config. ssh
always gets (``-F``) a small generated config that includes the files ssh would have read (the
explicit config file, else ``~/.ssh/config`` and ``/etc/ssh/ssh_config``); with no policy, or
``accept-new`` (which must never loosen a stricter config), it then sets ``StrictHostKeyChecking
accept-new`` for every host. OpenSSH keeps the first value it obtains, so a policy the user's
configuration sets explicitly, ``ask`` included, wins and ours is only the fallback
(:func:`~hostinv.sshopts.fallback_config_text`). The generated files are kept, named by their
content, under ``$REMOTE_ACP_CACHE_DIR/ssh`` (default: the platformdirs user cache directory of
``remote-acp``).
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import shutil
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Protocol

from hostinv.sshopts import fallback_config_text, login_home

from ...errors import ErrorKind, RemoteAcpError
from ...logs import get_logger
from ...masking import assigned_secrets, secret_values
from ..launch import LaunchSpec, check_env_text, check_workspace_text, command_argv
from ..stderr_tail import TailReport
from .argv import local_ssh_options, ready_bound_ms, ssh_argv
from .config import (
    effective_host_key_policy,
    fallback_config_dir,
    ssh_g_cache_dir,
    write_fallback_config,
)
from .destination import Destination, parse_destination
from .errors import is_ssh_chatter, ssh_exit_error, ssh_ready_error
from .loader import BOOTSTRAP, stdin_prefix
from .ready_marker import ReadyMarker
from .relay.attach import is_relay_line
from .relay.login import attach_login_script
from .relay_starter import RelayStarter
from .relink import Relink, SessionRef
from .script import remote_script
from .settings import SshSettings
from .start_slots import start_slot

if TYPE_CHECKING:
    import contextlib
    from collections.abc import Mapping, Sequence

    from ..exit_status import ExitStatus

__all__ = [
    "Preflight",
    "SshTarget",
]

log = get_logger("remote_acp.targets.ssh.target")


class Preflight(Protocol):
    """A look at the host inside the session's own login, before the agent starts.

    :attr:`script` runs in the session script (see :func:`remote_script`) before the workspace
    is entered; what it prints on stdout reaches :meth:`admit` once the ready marker follows it,
    which lets the agent start (``None``) or refuses (the error the session's start fails with;
    the host starts nothing). ``fleet``'s host check runs ``hostinv``'s probe this way, so a
    check with the handshake logs in once.
    """

    @property
    def script(self) -> str:
        """POSIX sh, ASCII; stdin is ``/dev/null``."""
        ...

    @property
    def bound_ms(self) -> int:
        """How long the script may take: added to the session's ready bound."""
        ...

    def admit(self, printed: bytes) -> RemoteAcpError | None:
        """Whether the agent may start, from what came before the ready marker. Never raises."""
        ...


RELAY_HEADER_S: Final = 5.0
"""A reconnect's bound beyond the login's: the relay's attach step answering (its lock waits)."""
READY_REPLY: Final = b"go\n"
"""The go-ahead the client writes once it saw the ready marker; the script reads it before the
agent starts."""


@dataclass(frozen=True, slots=True)
class SshTarget:
    """Run the agent on ``host`` through the local ``ssh`` binary, one process per session."""

    host: str
    settings: SshSettings = field(default_factory=SshSettings)
    environ: Mapping[str, str] | None = field(default=None, repr=False)
    """Where ``pass_env`` values are read, and the local ssh's environment (default: ours). Kept
    out of the repr: it holds secrets."""
    preflight: Preflight | None = field(default=None, repr=False, compare=False)
    """Run before the agent starts, in the same login (see :class:`Preflight`)."""
    reattach: SessionRef | None = field(default=None, repr=False, compare=False)
    """Take this detached session over instead of starting one (needs the settings' window)."""

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
        check_workspace_text(workspace)
        if not workspace.startswith("/"):
            raise RemoteAcpError(ErrorKind.INVALID_WORKSPACE_CWD, f"the workspace path {workspace!r} is not absolute")
        if isinstance(command, str):
            if not command.strip():
                raise RemoteAcpError(ErrorKind.AGENT_NOT_FOUND, "the agent command is empty or whitespace-only")
            if "\0" in command:
                raise RemoteAcpError(ErrorKind.AGENT_NOT_FOUND, "the agent command contains a NUL character")
        else:
            command_argv(list(command))
        environ = dict(os.environ if self.environ is None else self.environ)
        # Covers the carried values too: they are read from this environment.
        check_env_text(environ, "the local ssh's environment")
        ssh = shutil.which("ssh", path=environ.get("PATH", os.defpath))
        if ssh is None:
            raise RemoteAcpError(ErrorKind.AGENT_NOT_FOUND, "ssh binary not found on this host's PATH")
        carried = {}
        # Taking a session over carries nothing: its agent has the environment it started with.
        for name in self.settings.pass_env if self.reattach is None else ():
            if name not in environ:
                raise RemoteAcpError(
                    ErrorKind.AGENT_NOT_FOUND, f"ssh_pass_env names {name}, which is not set in the environment"
                )
            carried[name] = environ[name]
        marker = f"remote-acp-ready-{secrets.token_hex(8)}"
        window = self.settings.reattach_window_s
        if self.reattach is not None:
            script = attach_login_script(ready_marker=marker)
        else:
            script = remote_script(
                workspace,
                command,
                carried,
                kill_grace_s=self.settings.kill_grace_s,
                ready_marker=marker,
                capacity=self.settings.capacity,
                preflight=self.preflight.script if self.preflight is not None else None,
                reattach_window_s=window,
            )
        config = await self._ssh_config(ssh, destination, environ)
        spec = LaunchSpec(
            # The login shell sees a fixed line; the script and every datum go on stdin.
            argv=ssh_argv(
                ssh,
                destination,
                self.settings,
                BOOTSTRAP,
                config=config,
                known_options=await local_ssh_options(ssh, environ),
            ),
            env=environ,
            cwd=None,
            target=destination.label,
            remote=True,
            prelude=ReadyMarker(
                opening=stdin_prefix(script, whole_input=True),  # nothing else goes before the marker
                marker=marker.encode(),
                reply=READY_REPLY,
                bound_ms=ready_bound_ms(self.settings) + (self.preflight.bound_ms if self.preflight else 0),
                gate=self.preflight.admit if self.preflight is not None else None,
                explain=self.ready_error,
            ),
            stderr_chatter=is_ssh_chatter if window is None else _relayed_chatter,
            # Carried values are masked too (above the length below which masking would
            # garble ordinary words), whatever their names.
            secrets=tuple(
                sorted(
                    {*secret_values(environ), *secret_values(carried, any_name=True), *assigned_secrets(command)},
                    key=len,
                    reverse=True,
                )
            ),
        )
        if window is None:
            return spec
        return dataclasses.replace(spec, starter=RelayStarter(self._relink(spec, marker, window), self.reattach))

    def _relink(self, spec: LaunchSpec, marker: str, window_s: int) -> Relink:
        """How the session's later connections are opened: the same ssh, the attach login on stdin."""
        bound_ms = ready_bound_ms(self.settings)
        relink = ReadyMarker(
            opening=stdin_prefix(attach_login_script(ready_marker=marker), whole_input=True),
            marker=marker.encode(),
            reply=READY_REPLY,
            bound_ms=bound_ms,
            explain=self.ready_error,
        )
        return Relink(
            spec=dataclasses.replace(spec, prelude=relink),
            marker=marker.encode(),
            go_ahead=READY_REPLY,
            window_s=window_s,
            destination=self.host,
            config_file=os.path.abspath(config)
            if (config := self.settings.config_file) and config != "none"
            else config,
            attempt_s=bound_ms / 1000 + RELAY_HEADER_S,
            host=self.label,
        )

    async def _ssh_config(self, ssh: str, destination: Destination, environ: dict[str, str]) -> str:
        """What ``-F`` gets (see :func:`ssh_argv`), with the warnings about an insecure policy."""
        settings = self.settings
        config = ssh_config_file(settings)
        if settings.host_key_policy is not None:
            if settings.host_key_policy == "no":
                log.warning(
                    "host key checking is off for this session: a changed host key will not stop it",
                    extra={"host": destination.label},
                )
        elif await effective_host_key_policy(ssh, destination, config, environ, cache=str(ssh_g_cache_dir())) == "no":
            log.warning(
                "the ssh_config turns host key checking off for this host: a changed host key will not stop "
                "the session",
                extra={"host": destination.label},
            )
        return config

    def start_slot(self) -> contextlib.AbstractAsyncContextManager[None]:
        """One of the host's start slots (see :attr:`SshSettings.max_concurrent_starts`).

        Starts are counted per sshd: the address and port as written, without the user (sshd's
        limit is the same for every user), and per ssh_config file (an alias means what its file
        says). Two aliases of one host are counted apart.

        :raises RemoteAcpError: ``agent_not_found`` for a destination :func:`parse_destination` refuses.
        """
        return start_slot(start_key(self.host, self.settings), self.settings.max_concurrent_starts)

    def exit_error(
        self, status: ExitStatus, *, agent_wrote: bool, stderr: str, ready: bool | None = None
    ) -> RemoteAcpError | None:
        whole = _whole(stderr)
        error = ssh_exit_error(
            self.label, status, agent_wrote=agent_wrote, stderr=whole, ready=ready, config=self.settings.config_file
        )
        return _shown(error, whole, stderr)

    def ready_error(self, bound_ms: int, *, stderr: str, printed: str) -> RemoteAcpError | None:
        """ssh's reading of a ready marker that did not come (the prelude's ``explain``): a
        connection that never completed, or a login that hangs; ``None`` for the generic one."""
        whole = _whole(stderr)
        error = ssh_ready_error(self.label, bound_ms, stderr=whole, printed=printed, config=self.settings.config_file)
        return _shown(error, whole, stderr)


def _relayed_chatter(line: str) -> bool:
    """ssh's chatter, and the relay's own lines (its end report), kept out of what is shown."""
    return is_ssh_chatter(line) or is_relay_line(line)


def _whole(stderr: str) -> str:
    """The stderr report with ssh's chatter, which the readers need (``Authenticated to`` tells a
    login that happened from one that did not)."""
    return stderr.whole if isinstance(stderr, TailReport) else stderr


def _shown(error: RemoteAcpError | None, whole: str, shown: str) -> RemoteAcpError | None:
    """``error`` with the report it carries as its detail shown without ssh's chatter."""
    if error is None or whole == shown or error.detail != whole:
        return error
    clean = RemoteAcpError(error.kind, error.message, detail=str(shown), cause=error.cause, facts=error.facts)
    clean.__cause__ = error.__cause__
    return clean


def start_key(host: str, settings: SshSettings) -> str:
    """The key :meth:`SshTarget.start_slot` counts starts under."""
    destination = parse_destination(host)
    address = destination.host.rpartition("@")[2]
    config = settings.config_file or ""
    if config and config.lower() != "none":
        config = os.path.abspath(config)
    return f"{address} port {destination.port or 'default'} config {config}"


def ssh_config_file(settings: SshSettings) -> str:
    """The file ``-F`` gets: the generated config (:func:`~hostinv.sshopts.fallback_config_text`), with our host-key
    fallback when the settings choose no policy, written under :func:`fallback_config_dir`.

    :raises RemoteAcpError: ``agent_not_found`` for an explicit config file that does not exist
        (the fallback would include nothing from it), or a cache directory that cannot be used.
    """
    config_file = settings.config_file
    if config_file is not None and config_file.lower() != "none":
        if not os.path.exists(config_file) or os.path.isdir(config_file):
            raise RemoteAcpError(ErrorKind.AGENT_NOT_FOUND, f"the ssh config file {config_file} does not exist")
    if config_file is not None and config_file.lower() != "none":
        config_file = os.path.abspath(config_file)  # Include would read a relative path under ~/.ssh
        if os.path.realpath(config_file) == os.devnull:
            config_file = "none"  # the same (and ssh refuses to include a world-writable file)
    fallback = settings.host_key_policy in (None, "accept-new")  # never over a stricter config
    text = fallback_config_text(
        config_file, home=login_home(), by="remote-acp", share_connections=False, host_key_fallback=fallback
    )
    return str(write_fallback_config(text, fallback_config_dir()))
