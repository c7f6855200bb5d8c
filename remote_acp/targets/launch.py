"""Launch targets: where and how the agent runtime is started.

A target turns (agent command, workspace) into a :class:`LaunchSpec`: the argv, environment
and working directory of one local process. Everything above this layer (process, connection,
session) works on the spec and never asks which target made it. Target-specific rules that
matter later in a session's life (how an exit status reads on a remote launch) live on the
target too, in :meth:`LaunchTarget.exit_error`.
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

    from .exit_status import ExitStatus

__all__ = [
    "LaunchSpec",
    "LaunchTarget",
    "LocalTarget",
    "MINIMAL_ENV",
    "MINIMAL_ENV_PREFIX",
    "allowed_environment",
    "check_env_text",
    "check_local_workspace",
    "check_workspace_text",
    "command_argv",
    "resolve_program",
]


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """What to run locally: argv, environment and cwd, plus the target's facts about it."""

    argv: list[str]
    env: dict[str, str] = field(repr=False)
    cwd: str | None
    target: str
    """A short label for logs: ``local`` or the host."""
    remote: bool = False
    stdin_prefix: bytes = field(default=b"", repr=False)
    """Bytes written to the agent's stdin before the first protocol byte."""
    secrets: tuple[str, ...] = field(default=(), repr=False)
    """Values masked wherever the agent's output is shown."""
    ready_marker: bytes = b""
    """When set, the launched side prints this line on stdout once it is ready for the protocol
    (a remote login done): until then only :attr:`stdin_prefix` is written, and what comes before
    the line on stdout is not protocol (it is kept, bounded, for the error that names it)."""
    ready_reply: bytes = field(default=b"", repr=False)
    """Written first once the marker was seen: the launched side's go-ahead."""
    ready_timeout_ms: int = 0
    """How long the marker may take (``0``: the ``initialize`` bound)."""
    ready_gate: Callable[[bytes], RemoteAcpError | None] | None = field(default=None, repr=False)
    """Asked once the marker was seen, with what came before it on stdout (up to
    :data:`~remote_acp.session.connection.GATED_OUTPUT_KEPT` bytes): ``None`` lets the go-ahead
    go; an error refuses it, and the session's start fails with that error while the launched
    side, never given the go-ahead, starts nothing. It must not raise."""
    stderr_chatter: Callable[[str], bool] | None = field(default=None, repr=False)
    """Tells the launcher's own lines on stderr (ssh's at ``LogLevel VERBOSE``): the stderr tail
    keeps them apart, out of what is logged and shown (see
    :class:`~remote_acp.targets.stderr_tail.StderrTail`)."""


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

        ``ready``: whether the launched side said it was ready (``None``: it has no marker)."""
        ...

    def ready_error(self, bound_ms: int, *, stderr: str, printed: str) -> RemoteAcpError | None:
        """Why a launched side with a ready marker did not print it within ``bound_ms`` (``printed``:
        what it printed instead, masked), or ``None`` for the generic reading."""
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
    the session mark (:data:`remote_acp.targets.process.SESSION_MARK`), by which the agent's
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

    def ready_error(self, bound_ms: int, *, stderr: str, printed: str) -> RemoteAcpError | None:
        return None
