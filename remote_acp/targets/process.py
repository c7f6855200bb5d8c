"""The agent subprocess: pipes, its own process group, exit watching and the teardown steps.

Theory of operation: the process is started with ``subprocess.Popen`` on pipes we create, in
a new session (so its pid is also its process-group id). All pipe I/O is non-blocking and
awaited through ``anyio.wait_readable``/``wait_writable``, which works on asyncio and trio alike
and involves no helper threads. Exit is observed through a pidfd with ``WNOWAIT``, so the exit
status is known while the zombie still reserves the pid and group id: the group can then be
SIGKILLed as a backstop without any risk of hitting a recycled id. The zombie is reaped last.

Reaping never depends on the pipes: a descendant holding stdout open cannot delay the exit
report (asyncio's own subprocess wait does exactly that on Python 3.11).
"""

from __future__ import annotations

import errno
import os
import secrets
import signal
import subprocess
from typing import TYPE_CHECKING

import anyio

from ..errors import ErrorKind, RemoteAcpError
from . import process_tree
from .exit_status import ExitStatus
from .stderr_tail import StderrTail

if TYPE_CHECKING:
    from .launch import LaunchSpec

__all__ = ["SESSION_MARK", "AgentProcess", "ExitStatus", "PipeClosed"]

READ_SIZE = 256 * 1024
SESSION_MARK = "REMOTE_ACP_SESSION"
"""Set in the agent's environment to a random token, so every descendant can be found."""
_POLL_INTERVAL = 0.02


class PipeClosed(Exception):
    """A write to the agent's stdin failed: the agent closed it, exited, or we closed it."""


class AgentProcess:
    """One running agent process and the file descriptors connecting us to it."""

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        stdin: int,
        stdout: int,
        stderr: int,
        tail: StderrTail,
        *,
        token: str = "",
    ) -> None:
        self._popen = popen
        self.pid = popen.pid
        self._token = token
        self._stdin: int | None = stdin
        self._stdout: int | None = stdout
        self._stderr: int | None = stderr
        # The ends the agent's side holds: whoever still has one of these open is the agent's.
        self._child_ends = {
            os.fstat(stdin).st_ino: os.O_RDONLY,
            os.fstat(stdout).st_ino: os.O_WRONLY,
            os.fstat(stderr).st_ino: os.O_WRONLY,
        }
        self._reaped_elsewhere = False
        self.stderr_tail = tail
        self.exit_status: ExitStatus | None = None
        self.exited = anyio.Event()
        self.stdout_eof = anyio.Event()
        self.stderr_eof = anyio.Event()
        self._escapees: list[process_tree.ProcessRef] = []
        self._pidfd: int | None = None
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            self._pidfd = None  # pre-5.3 kernels and non-Linux systems: poll instead

    @classmethod
    def spawn(cls, spec: LaunchSpec, *, stderr_tail_bytes: int = 8192) -> AgentProcess:
        """Start the process described by ``spec``.

        :raises RemoteAcpError: ``agent_not_found`` when the program vanished since it was
            resolved, ``invalid_workspace_cwd`` when the directory did, ``port_exit`` for any
            other start failure.
        """
        token = secrets.token_hex(8)
        env = {**spec.env, SESSION_MARK: token}
        child_ends: list[int] = []
        ours: list[int] = []
        try:
            for child_reads in (True, False, False):  # stdin, stdout, stderr
                read_end, write_end = os.pipe()
                child_ends.append(read_end if child_reads else write_end)
                ours.append(write_end if child_reads else read_end)
            popen = subprocess.Popen(
                spec.argv,
                stdin=child_ends[0],
                stdout=child_ends[1],
                stderr=child_ends[2],
                cwd=spec.cwd,
                env=env,
                start_new_session=True,
                close_fds=True,
            )
        except (OSError, ValueError, TypeError) as exc:
            for fd in ours:
                os.close(fd)
            raise _start_error(exc, spec) from None
        finally:
            for fd in child_ends:
                os.close(fd)
        for fd in ours:
            os.set_blocking(fd, False)
        stdin, stdout, stderr = ours
        return cls(popen, stdin, stdout, stderr, StderrTail(stderr_tail_bytes, spec.secrets), token=token)

    # -- pipes --------------------------------------------------------------------------------

    async def read_stdout(self) -> bytes:
        """The next bytes of stdout; ``b""`` at end of stream or once we closed it."""
        fd = self._stdout
        while fd is not None:
            try:
                return os.read(fd, READ_SIZE)
            except BlockingIOError:
                pass
            except OSError:
                return b""
            try:
                await anyio.wait_readable(fd)
            except (anyio.ClosedResourceError, OSError):
                return b""
            fd = self._stdout
        return b""

    async def write_stdin(self, data: bytes) -> None:
        """Write all of ``data``; waits while the pipe is full.

        :raises PipeClosed: when stdin is closed or the agent no longer reads it.
        """
        view = memoryview(data)
        while view:
            fd = self._stdin
            if fd is None:
                raise PipeClosed("stdin is closed")
            try:
                written = os.write(fd, view)
            except BlockingIOError:
                try:
                    await anyio.wait_writable(fd)
                except (anyio.ClosedResourceError, OSError):
                    raise PipeClosed("stdin was closed while writing") from None
                continue
            except OSError as exc:
                raise PipeClosed(os.strerror(exc.errno or errno.EPIPE)) from None
            view = view[written:]

    async def drain_stderr(self) -> None:
        """Read stderr into the bounded tail until end of stream (run as a task)."""
        try:
            while (fd := self._stderr) is not None:
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    try:
                        await anyio.wait_readable(fd)
                    except (anyio.ClosedResourceError, OSError):
                        return
                    continue
                except OSError:
                    return
                if not data:
                    return
                self.stderr_tail.feed(data)
        finally:
            self.stderr_eof.set()

    def close_stdin(self) -> None:
        self._stdin = self._close(self._stdin)

    def close_stdout(self) -> None:
        self._stdout = self._close(self._stdout)

    def close_stderr(self) -> None:
        self._stderr = self._close(self._stderr)

    @staticmethod
    def _close(fd: int | None) -> None:
        if fd is not None:
            anyio.notify_closing(fd)  # wake a task waiting on it before the number is reused
            os.close(fd)
        return None

    # -- exit ---------------------------------------------------------------------------------

    async def watch_exit(self) -> None:
        """Wait until the process exits, then record its status without reaping it (a task)."""
        while self.exit_status is None:
            if self._pidfd is not None:
                try:
                    await anyio.wait_readable(self._pidfd)
                except (anyio.ClosedResourceError, OSError):
                    return
            else:
                await anyio.sleep(_POLL_INTERVAL)
            self._peek_exit()
        self.exited.set()

    def _peek_exit(self) -> None:
        if self.exit_status is not None or self._popen.returncode is not None:
            if self._popen.returncode is not None and self.exit_status is None:
                self.exit_status = _from_returncode(self._popen.returncode)
            return
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            # Someone else reaped it (an application ignoring SIGCHLD gets its children reaped
            # by the kernel): it is gone, and its status with it.
            self._reaped_elsewhere = True
            self.exit_status = ExitStatus(None)
            self._popen.returncode = -1  # nothing left to wait for (and no "still running" warning)
            return
        if info is None:
            return
        if info.si_code == os.CLD_EXITED:
            self.exit_status = ExitStatus(info.si_status)
        else:
            self.exit_status = ExitStatus(None, info.si_status)

    def reap(self) -> ExitStatus | None:
        """Collect the zombie if the process has exited; safe to call more than once."""
        if self._popen.returncode is None and not self._reaped_elsewhere:
            self._popen.poll()
        if self._popen.returncode is not None and self.exit_status is None:
            self.exit_status = _from_returncode(self._popen.returncode)
        return self.exit_status

    def release(self) -> None:
        """Close every descriptor still open (the last teardown step)."""
        self.close_stdin()
        self.close_stdout()
        self.close_stderr()
        if self._pidfd is not None:
            fd, self._pidfd = self._pidfd, None
            anyio.notify_closing(fd)
            os.close(fd)

    # -- signals ------------------------------------------------------------------------------

    def remember_descendants(self) -> None:
        """Note the agent's descendants now: those still linked to it by parent, and those
        carrying this session's mark in their environment (found even after they left the
        process group and lost their parent)."""
        known = set(self._escapees)
        found = process_tree.descendants(self.pid)
        if self._token:
            found += process_tree.marked(f"{SESSION_MARK}={self._token}")
        self._escapees += [ref for ref in found if ref not in known and ref.pid != self.pid]

    def signal_group(self, sig: int) -> None:
        """Signal the process group and every remembered descendant that left it."""
        # A reaped leader no longer reserves the group id, so the group is left alone then.
        if self._popen.returncode is None and not self._reaped_elsewhere:
            try:
                os.killpg(self.pid, sig)
            except OSError:
                pass
        process_tree.signal_refs(self._escapees, sig)

    def kill_pipe_holders(self) -> None:
        """SIGKILL any process, wherever it went, that still holds the agent's end of our pipes.

        Only the agent's ends count (its stdin for reading, its stdout and stderr for writing):
        a process forked by the application embedding us inherits our ends, not theirs.
        """
        holders = process_tree.pipe_holders(self._child_ends)
        process_tree.signal_refs(holders, signal.SIGKILL)


def _from_returncode(code: int) -> ExitStatus:
    return ExitStatus(None, -code) if code < 0 else ExitStatus(code)


def _start_error(exc: OSError | ValueError | TypeError, spec: LaunchSpec) -> RemoteAcpError:
    if not isinstance(exc, OSError):  # a NUL byte or a non-string in the argv or environment
        return RemoteAcpError(ErrorKind.PORT_EXIT, f"failed to start the agent subprocess: {exc}")
    if spec.cwd is not None and exc.filename == spec.cwd:
        return RemoteAcpError(
            ErrorKind.INVALID_WORKSPACE_CWD, f"the workspace {spec.cwd!r} cannot be entered: {exc.strerror}"
        )
    if isinstance(exc, FileNotFoundError):
        return RemoteAcpError(ErrorKind.AGENT_NOT_FOUND, f"agent program {spec.argv[0]!r} was not found")
    return RemoteAcpError(ErrorKind.PORT_EXIT, f"failed to start the agent subprocess: {exc.strerror or exc}")
