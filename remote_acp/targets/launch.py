"""Launch targets: where and how the agent runtime is started.

A target turns (agent command, workspace) into a :class:`LaunchSpec`: the argv, environment
and working directory of one local process. Everything above this layer (process, connection,
session) works on the spec and never asks which target made it. Target-specific rules that
matter later in a session's life (how an exit status reads on a remote launch) live on the
target too, in :meth:`LaunchTarget.exit_error`.

A target whose launched side must do something before the protocol starts (ssh's login: the
script on stdin, a ready marker, a go-ahead) says so with the spec's :class:`Prelude`, which the
connection runs on the raw byte stream and then hands over (as httpcore keeps ``start_tls`` in
its backend): the connection itself is JSON-RPC over a ready stream.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Protocol

from ..errors import Cause, ErrorFacts, ErrorKind, RemoteAcpError
from ..masking import secret_values

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from .agent_end import AgentEnd
    from .exit_status import ExitStatus

__all__ = [
    "AgentStarter",
    "LaunchSpec",
    "LaunchTarget",
    "LocalTarget",
    "MINIMAL_ENV",
    "MINIMAL_ENV_PREFIX",
    "Prelude",
    "PreludeState",
    "Ready",
    "allowed_environment",
    "check_env_text",
    "check_local_workspace",
    "check_workspace_text",
    "command_argv",
    "resolve_program",
]


@dataclass(frozen=True, slots=True)
class Ready:
    """The launched side is ready for the protocol."""

    reply: bytes
    """Written first, before any protocol byte (a go-ahead; may be empty)."""
    rest: bytes
    """What followed on stdout, in the same read: the protocol's first bytes."""


class PreludeState(Protocol):
    """One launch's run of a :class:`Prelude`: fed the raw stdout until it says ready (no I/O)."""

    @property
    def printed(self) -> bytes:
        """What the launched side printed so far, not protocol (its last bytes, bounded)."""
        ...

    def feed(self, data: bytes) -> Ready | RemoteAcpError | None:
        """Read ``data``: ``None`` while not ready (the bytes are not protocol); :class:`Ready`
        once ready; an error when the launched side may not start (the start fails with it,
        and nothing more is fed). Never raises."""
        ...


class Prelude(Protocol):
    """A launched side's own step before the protocol (a remote login), described by its target.

    The connection writes :attr:`opening`, and nothing else, until the state :meth:`begin`
    returned says ready; the session waits for that at most :attr:`bound_ms` (``0``: the
    ``initialize`` bound) and then fails the start with :meth:`not_ready_error`.
    """

    @property
    def opening(self) -> bytes:
        """Written to stdin first."""
        ...

    @property
    def bound_ms(self) -> int: ...

    def begin(self) -> PreludeState:
        """A fresh run, for one launch (a session may launch its agent more than once)."""
        ...

    def not_ready_error(self, bound_ms: int, *, stderr: str, printed: str) -> RemoteAcpError:
        """Why the launched side did not get ready within ``bound_ms``; ``printed``: what it
        printed instead (masked, bounded), ``stderr``: its stderr report."""
        ...


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """What to run locally: argv, environment and cwd, plus the target's facts about it."""

    argv: list[str]
    env: dict[str, str] = field(repr=False)
    cwd: str | None
    target: str
    """A short label for logs: ``local`` or the host."""
    remote: bool = False
    secrets: tuple[str, ...] = field(default=(), repr=False)
    """Values masked wherever the agent's output is shown."""
    prelude: Prelude | None = field(default=None, repr=False)
    """The launched side's step before the protocol, if it has one (ssh's login)."""
    stderr_chatter: Callable[[str], bool] | None = field(default=None, repr=False)
    """Tells the launcher's own lines on stderr (ssh's at ``LogLevel VERBOSE``): the stderr tail
    keeps them apart, out of what is logged and shown (see
    :class:`~remote_acp.targets.stderr_tail.StderrTail`)."""
    starter: AgentStarter | None = field(default=None, repr=False)
    """What starts the agent's end for this spec (see :mod:`remote_acp.targets.agent_end`);
    ``None``: one local process, :meth:`~remote_acp.targets.process.agent.AgentProcess.start`."""

    # Read-only views of a ready-marker prelude, for code that speaks the start by hand; new code
    # reads :attr:`prelude` (a :class:`~remote_acp.targets.ssh.ready_marker.ReadyMarker` over ssh).
    @property
    def stdin_prefix(self) -> bytes:
        return self.prelude.opening if self.prelude is not None else b""

    @property
    def ready_marker(self) -> bytes:
        return _bytes_of(self.prelude, "marker")

    @property
    def ready_reply(self) -> bytes:
        return _bytes_of(self.prelude, "reply")


def _bytes_of(prelude: Prelude | None, name: str) -> bytes:
    value = getattr(prelude, name, b"")
    return value if isinstance(value, bytes) else b""


class AgentStarter(Protocol):
    """Starts the agent's end for a spec (see :attr:`LaunchSpec.starter`)."""

    async def __call__(self, spec: LaunchSpec, *, stderr_tail_bytes: int) -> AgentEnd: ...


class LaunchTarget(Protocol):
    """The one interface a session needs from a place to run an agent."""

    @property
    def label(self) -> str:
        """A short name for logs and results (``local``, or a host)."""
        ...

    @property
    def remote(self) -> bool:
        """Whether the runtime runs on another machine (no tool servers, no measurement)."""
        ...

    async def prepare(self, command: str | Sequence[str], workspace: str) -> LaunchSpec:
        """Validate the workspace and command and build the spec.

        :raises RemoteAcpError: ``invalid_workspace_cwd`` or ``agent_not_found``.
        """
        ...

    def start_slot(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Held by the session from the spawn to the end of ``initialize``: a target whose host
        refuses too many connection attempts at once makes starts beyond its limit wait here."""
        ...

    def exit_error(
        self, status: ExitStatus, *, agent_wrote: bool, stderr: str, ready: bool | None = None
    ) -> RemoteAcpError | None:
        """A target-specific reading of the launched process's exit, or ``None`` for the generic one.

        ``ready``: whether the launched side got through its :class:`Prelude` (``None``: it has none)."""
        ...


def command_argv(command: str | Sequence[str]) -> list[str]:
    """The agent command as words: a list as is, a string split with POSIX shell rules.

    :raises RemoteAcpError: ``agent_not_found`` when the command is empty or cannot be split.
    """
    if isinstance(command, str):
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise RemoteAcpError(
                ErrorKind.AGENT_NOT_FOUND,
                f"the agent command cannot be split into words: {exc}",
                cause=Cause.CONFIG_INVALID,
            ) from None
    else:
        argv = list(command)
    if not argv or not argv[0].strip():
        raise RemoteAcpError(
            ErrorKind.AGENT_NOT_FOUND, "the agent command is empty or whitespace-only", cause=Cause.CONFIG_INVALID
        )
    if any("\0" in word for word in argv):
        raise RemoteAcpError(
            ErrorKind.AGENT_NOT_FOUND, "the agent command contains a NUL character", cause=Cause.CONFIG_INVALID
        )
    return argv


def resolve_program(program: str, path: str | None, cwd: str | None = None) -> str:
    """The executable ``program`` names: a bare name looked up on ``path``; a path as is, a
    relative one taken from ``cwd`` (where the child will run).

    :raises RemoteAcpError: ``agent_not_found``.
    """
    if cwd is not None and os.sep in program and not os.path.isabs(program):
        program = os.path.join(cwd, program)
    found = shutil.which(program, path=path)
    if found is None:
        where = "" if os.sep in program else " on PATH"
        raise RemoteAcpError(
            ErrorKind.AGENT_NOT_FOUND, f"agent program {program!r} was not found{where} or is not executable"
        )
    return found


def check_workspace_text(workspace: str) -> None:
    """Refuse a workspace no directory can have: empty, or holding a NUL character.

    :raises RemoteAcpError: ``invalid_workspace_cwd``.
    """
    if not workspace or not workspace.strip():
        raise RemoteAcpError(ErrorKind.INVALID_WORKSPACE_CWD, "the workspace path is empty")
    if "\0" in workspace:
        raise RemoteAcpError(ErrorKind.INVALID_WORKSPACE_CWD, "the workspace path contains a NUL character")


def check_env_text(env: Mapping[str, str], what: str) -> None:
    """Refuse an environment no process can be given: a NUL anywhere, or ``=`` in a name. Only
    the name is quoted in the message (the value may be a secret).

    :raises RemoteAcpError: ``agent_not_found`` (the launch is misconfigured; retrying cannot help).
    """
    for name, value in env.items():
        if not name or "\0" in name or "=" in name:
            raise RemoteAcpError(
                ErrorKind.AGENT_NOT_FOUND, f"{what} has a variable name that cannot be set", cause=Cause.CONFIG_INVALID
            )
        if "\0" in value:
            raise RemoteAcpError(
                ErrorKind.AGENT_NOT_FOUND,
                f"{what} gives {name} a value with a NUL character",
                cause=Cause.CONFIG_INVALID,
            )


def check_local_workspace(workspace: str) -> str:
    """The workspace, if it is a non-empty absolute path to an existing directory.

    :raises RemoteAcpError: ``invalid_workspace_cwd``.
    """
    check_workspace_text(workspace)
    if not os.path.isabs(workspace):
        raise RemoteAcpError(
            ErrorKind.INVALID_WORKSPACE_CWD,
            f"the workspace path {workspace!r} is not absolute",
            facts=ErrorFacts(workspace=workspace),
        )
    if not os.path.exists(workspace):
        raise RemoteAcpError(
            ErrorKind.INVALID_WORKSPACE_CWD,
            f"the workspace {workspace!r} does not exist",
            facts=ErrorFacts(workspace=workspace),
        )
    if not os.path.isdir(workspace):
        raise RemoteAcpError(
            ErrorKind.INVALID_WORKSPACE_CWD,
            f"the workspace {workspace!r} is not a directory",
            facts=ErrorFacts(workspace=workspace),
        )
    return workspace


MINIMAL_ENV: Final = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TMPDIR", "TZ")
"""What an agent under an environment allow-list still gets, when this process has it: what a
program needs to find other programs, its home and temporary directory, and to read and print
text in the user's language. Every ``LC_*`` variable is kept too (:data:`MINIMAL_ENV_PREFIX`). None
of these carries a credential."""
MINIMAL_ENV_PREFIX: Final = "LC_"


def allowed_environment(environ: Mapping[str, str], allowlist: Sequence[str]) -> dict[str, str]:
    """The variables of ``environ`` an allow-list keeps: the named ones plus the minimal set."""
    keep = {*allowlist, *MINIMAL_ENV}
    return {k: v for k, v in environ.items() if k in keep or k.startswith(MINIMAL_ENV_PREFIX)}


@dataclass(frozen=True, slots=True)
class LocalTarget:
    """Run the agent as a local subprocess in the workspace.

    By default the child inherits the full environment of this process. ``env_allowlist`` (for
    an agent you do not trust) narrows it to the named variables plus :data:`MINIMAL_ENV` and
    ``LC_*``; ``extra_env`` then adds or overrides. The process layer adds one variable of its own,
    the session mark (:data:`remote_acp.targets.process.agent.SESSION_MARK`), by which the agent's
    descendants are found at teardown.
    """

    env_allowlist: tuple[str, ...] | None = None
    extra_env: Mapping[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return "local"

    @property
    def remote(self) -> bool:
        return False

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.env_allowlist is not None:
            env = allowed_environment(env, self.env_allowlist)
        env.update(self.extra_env)
        return env

    async def prepare(self, command: str | Sequence[str], workspace: str) -> LaunchSpec:
        cwd = check_local_workspace(workspace)
        argv = command_argv(command)
        env = self.environment()
        check_env_text(env, "the agent's environment")
        argv[0] = resolve_program(argv[0], env.get("PATH", os.defpath), cwd)
        return LaunchSpec(argv=argv, env=env, cwd=cwd, target=self.label, secrets=self.secrets(env))

    def secrets(self, env: Mapping[str, str]) -> tuple[str, ...]:
        """What is masked wherever the agent's words go: values of secret-looking names, and
        every value an operator chose to pass (the allow-list beyond :data:`MINIMAL_ENV`, and
        ``extra_env``), whatever its name, as ``ssh_pass_env`` values are over ssh."""
        chosen = {
            name: value
            for name, value in env.items()
            if name in self.extra_env
            or (
                self.env_allowlist is not None
                and name in self.env_allowlist
                and name not in MINIMAL_ENV
                and not name.startswith(MINIMAL_ENV_PREFIX)
            )
        }
        return tuple(sorted({*secret_values(env), *secret_values(chosen, any_name=True)}, key=len, reverse=True))

    def start_slot(self) -> contextlib.AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()

    def exit_error(
        self, status: ExitStatus, *, agent_wrote: bool, stderr: str, ready: bool | None = None
    ) -> RemoteAcpError | None:
        return None
