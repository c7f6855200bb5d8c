"""The agent subprocess: pipes, its own process group, containment, exit watching and the
teardown steps.

Theory of operation: the agent is started by a supervisor process (see :mod:`.containment`),
on pipes we create, in a new session (so its pid is also its process-group id). The supervisor
keeps every descendant of the agent inside its tree and kills the tree when told to or when we
die, however we die. All pipe I/O is non-blocking and awaited through
``anyio.wait_readable``/``wait_writable``, which works on asyncio and trio alike and involves no
helper threads. The agent's exit status arrives from the supervisor, which keeps the zombie
until the tree is killed: the group can be signalled as a backstop without any risk of hitting
a recycled id.

Reaping never depends on the pipes: a descendant holding stdout open cannot delay the exit
report (asyncio's own subprocess wait does exactly that on Python 3.11). The ``/proc`` scans of
the fallback paths run in a worker thread, never on the event loop.
"""

from __future__ import annotations

import errno
import os
import signal
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from ...errors import ErrorKind, RemoteAcpError
from ..exit_status import ExitStatus
from ..limits import DESCRIPTOR_ERRNOS, out_of_descriptors
from ..stderr_tail import StderrTail
from . import tree as process_tree
from .containment import StartFailed, Supervisor

if TYPE_CHECKING:
    from ..agent_end import LinkWatcher
    from ..launch import LaunchSpec

__all__ = ["SESSION_MARK", "AgentProcess", "ExitStatus", "PipeClosed"]

READ_SIZE = 64 * 1024
SESSION_MARK = "REMOTE_ACP_SESSION"
"""Set in the agent's environment to a random token, so every descendant can be found."""
_POLL_INTERVAL = 0.02
KILL_BOUND_S = 2.0
"""How long :meth:`AgentProcess.kill` waits for the tree to be gone before killing it itself."""


class PipeClosed(Exception):
    """A write to the agent's stdin failed: the agent closed it, exited, or we closed it."""


class AgentProcess:
    """One running agent process, its supervisor and the file descriptors connecting us to it."""

    def __init__(
        self,
        supervisor: Supervisor,
        pid: int,
        stdin: int,
        stdout: int,
        stderr: int,
        tail: StderrTail,
        *,
        token: str = "",
    ) -> None:
        self._sup = supervisor
        self.pid = pid
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
        self.stderr_tail = tail
        self.exit_status: ExitStatus | None = None
        self.exited = anyio.Event()
        self.linked = anyio.Event()
        self.linked.set()  # nothing stands between us and the agent's pipes
        self.stdout_eof = anyio.Event()
        self.stderr_eof = anyio.Event()
        self._escapees: list[process_tree.ProcessRef] = []
        self._pidfd: int | None = None
        try:
            # Safe: the supervisor keeps the agent's zombie, so this pid is still the agent's.
            self._pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self._pidfd = None  # pre-5.3 kernels and non-Linux systems: poll instead

    @property
    def lost_error(self) -> None:
        """A process knows nothing beyond its exit status (see :class:`~remote_acp.targets.agent_end.AgentEnd`)."""
        return None

    def watch_link(self, watcher: LinkWatcher) -> None:
        """A local process has no link to lose."""

    @property
    def relay(self) -> None:
        return None

    async def detach(self) -> bool:
        return False

    @property
    def contained(self) -> bool:
        """Whether the supervisor keeps every descendant in its tree (a subreaper, Linux)."""
        return self._sup.reports.contained and not self._sup.gone

    @property
    def supervisor_pid(self) -> int:
        return self._sup.pid

    @property
    def supervisor_gone(self) -> bool:
        """Whether the supervisor exited (after :meth:`kill`, or killed by someone else)."""
        return self._sup.gone

    @classmethod
    def spawn(cls, spec: LaunchSpec, *, stderr_tail_bytes: int = 8192) -> AgentProcess:
        """Start the process described by ``spec``; blocks until its exec succeeded (the
        supervisor's start-up: use :meth:`start` to wait without blocking the event loop).

        :raises RemoteAcpError: ``agent_not_found`` when the program vanished since it was
            resolved, ``invalid_workspace_cwd`` when the directory did, ``port_exit`` for any
            other start failure.
        """
        sup, fds, token = cls._launch(spec)
        try:
            pid = sup.wait_started_blocking()
        except StartFailed as exc:
            cls._abandon(sup, fds)
            raise _start_error(exc.error, spec) from None
        return cls._make(sup, pid, fds, token, spec, stderr_tail_bytes)

    @classmethod
    async def start(cls, spec: LaunchSpec, *, stderr_tail_bytes: int = 8192) -> AgentProcess:
        """As :meth:`spawn`, but without blocking the event loop: the fork and exec run in a
        worker thread (many sessions starting at once would otherwise hold the loop for tens of
        milliseconds each), and the agent's exec is awaited."""
        with anyio.CancelScope(shield=True):  # a started agent must reach its caller's teardown
            sup, fds, token = await anyio.to_thread.run_sync(cls._launch, spec)
        try:
            with anyio.CancelScope(shield=True):
                pid = await sup.wait_started()
        except StartFailed as exc:
            cls._abandon(sup, fds)
            raise _start_error(exc.error, spec) from None
        return cls._make(sup, pid, fds, token, spec, stderr_tail_bytes)

    @classmethod
    def _launch(cls, spec: LaunchSpec) -> tuple[Supervisor, list[int], str]:
        token = os.urandom(8).hex()  # not `secrets`: it pulls in hashlib and OpenSSL
        env = {**spec.env, SESSION_MARK: token}
        child_ends: list[int] = []
        ours: list[int] = []
        try:
            for child_reads in (True, False, False):  # stdin, stdout, stderr
                read_end, write_end = os.pipe()
                child_ends.append(read_end if child_reads else write_end)
                ours.append(write_end if child_reads else read_end)
            sup = Supervisor.launch(
                spec.argv, env=env, cwd=spec.cwd, stdin=child_ends[0], stdout=child_ends[1], stderr=child_ends[2]
            )
        except (OSError, ValueError, TypeError) as exc:
            for fd in ours:
                os.close(fd)
            raise _start_error(exc, spec) from None
        finally:
            for fd in child_ends:
                os.close(fd)
        return sup, ours, token

    @staticmethod
    def _abandon(sup: Supervisor, fds: list[int]) -> None:
        for fd in fds:
            os.close(fd)
        sup.close()

    @classmethod
    def _make(
        cls, sup: Supervisor, pid: int, fds: list[int], token: str, spec: LaunchSpec, tail_bytes: int
    ) -> AgentProcess:
        for fd in fds:
            os.set_blocking(fd, False)
        stdin, stdout, stderr = fds
        tail = StderrTail(tail_bytes, spec.secrets, spec.stderr_chatter)
        return cls(sup, pid, stdin, stdout, stderr, tail, token=token)

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
        """Wait until the agent exits, then record its status (a task)."""
        sup = self._sup
        while self.exit_status is None:
            present = sup.read_available()
            if self._take_exit_report():
                break
            fd = sup.reports_fd
            if not present or fd is None:
                if fd is not None:  # the supervisor died without a word: watch the agent itself
                    await self._watch_uncontained_exit()
                return
            try:
                await anyio.wait_readable(fd)
            except (anyio.ClosedResourceError, OSError):
                return
        self.exited.set()

    def _take_exit_report(self) -> bool:
        status = self._sup.reports.exit_status
        if status is not None and self.exit_status is None:
            self.exit_status = status
            self.exited.set()
        return self.exit_status is not None

    async def _watch_uncontained_exit(self) -> None:
        while self._agent_alive():
            if self._pidfd is not None:
                try:
                    await anyio.wait_readable(self._pidfd)
                except (anyio.ClosedResourceError, OSError):
                    return
            else:
                await anyio.sleep(_POLL_INTERVAL)
        if self.exit_status is None:
            self.exit_status = ExitStatus(None)  # its parent is gone: nobody can tell us how it ended
        self.exited.set()

    def _agent_alive(self) -> bool:
        if self.exit_status is not None:
            return False
        if self._pidfd is not None:
            try:
                signal.pidfd_send_signal(self._pidfd, 0)
            except OSError:
                return False
            return process_tree.alive(self.pid)
        return process_tree.alive(self.pid)

    def reap(self) -> ExitStatus | None:
        """The exit status if the agent has exited; safe to call more than once. The agent's
        zombie is collected by the supervisor when the tree is killed (:meth:`kill`)."""
        self._sup.read_available()
        self._take_exit_report()
        self._sup.gone  # collects the supervisor if it exited  # noqa: B018
        return self.exit_status

    def release(self) -> None:
        """Close every descriptor still open (the last teardown step). Closing the lifeline
        makes the supervisor kill whatever is left of the tree."""
        self.close_stdin()
        self.close_stdout()
        self.close_stderr()
        if self._pidfd is not None:
            fd, self._pidfd = self._pidfd, None
            anyio.notify_closing(fd)
            os.close(fd)
        self._sup.close()

    # -- signals ------------------------------------------------------------------------------

    async def terminate(self) -> None:
        """SIGTERM to the agent's group and to every descendant, wherever it went."""
        self._signal_tree(signal.SIGTERM)
        if not self.contained:
            await self.remember_descendants_off_loop()
        process_tree.signal_refs(self._escapees, signal.SIGTERM)

    async def kill(self, bound_s: float = KILL_BOUND_S) -> None:
        """SIGKILL everything of the tree, repeated until nothing is left or ``bound_s`` passed.

        Contained, the supervisor does it and its exit says the tree is gone. Otherwise (or if
        the supervisor does not answer within the bound) the group, the remembered and marked
        escapees and the holders of the agent's pipe ends are killed from here, scans off the
        event loop, until a scan finds none.
        """
        deadline = anyio.current_time() + bound_s
        contained = self.contained
        self._signal_tree(signal.SIGKILL)
        if contained and await self._sup.wait_gone(bound_s):
            self._collect()
            return
        while True:
            if not self._sup.gone:
                # Not answering (stopped, or slow beyond reason): kill its tree, not it, from here.
                tree = await anyio.to_thread.run_sync(process_tree.descendants, self.supervisor_pid)
                process_tree.signal_refs(tree, signal.SIGKILL)
            elif self._agent_alive():
                self._killpg(signal.SIGKILL)
            await self.remember_descendants_off_loop()
            found = self._live(self._escapees)
            holders = await anyio.to_thread.run_sync(self._ours_holding_pipes)
            process_tree.signal_refs(found + holders, signal.SIGKILL)
            left = deadline - anyio.current_time()
            if (not found and not holders and self._sup.gone) or left <= 0:
                break
            await self._sup.wait_gone(min(0.05, left))
        self._collect()

    def _collect(self) -> None:
        self._sup.read_available()
        self._take_exit_report()
        if self._sup.gone and self.exit_status is None and not self._agent_alive():
            self.exit_status = ExitStatus(None)
            self.exited.set()

    def _signal_tree(self, sig: int) -> None:
        """The supervisor signals the group and every descendant; without one, the group here."""
        if not self._sup.gone:
            if sig == signal.SIGTERM:
                self._sup.send(b"T")
                return
            if sig == signal.SIGKILL:
                self._sup.send(b"K")
                return
        if self._agent_alive() or not self._sup.gone:
            self._killpg(sig)  # the zombie is kept while the supervisor lives: the id is still ours

    def _killpg(self, sig: int) -> None:
        try:
            os.killpg(self.pid, sig)
        except OSError:
            pass

    @staticmethod
    def _live(refs: list[process_tree.ProcessRef]) -> list[process_tree.ProcessRef]:
        return [ref for ref in refs if process_tree.is_running(ref)]

    def remember_descendants(self) -> None:
        """Note the agent's descendants now: those still linked to it by parent, and those
        carrying this session's mark in their environment (found even after they left the
        process group and lost their parent). Contained, nothing can leave: no scan needed.
        Scans on the calling thread: prefer :meth:`remember_descendants_off_loop`."""
        if not self.contained:
            self._remember(self._scan_descendants())

    async def remember_descendants_off_loop(self) -> None:
        """:meth:`remember_descendants` with the scans in a worker thread."""
        if not self.contained:
            self._remember(await anyio.to_thread.run_sync(self._scan_descendants))

    def _scan_descendants(self) -> list[process_tree.ProcessRef]:
        found = process_tree.descendants(self.pid)
        if self._token:
            found += process_tree.marked(f"{SESSION_MARK}={self._token}")
        return found

    def _remember(self, found: list[process_tree.ProcessRef]) -> None:
        known = set(self._escapees)
        ours = (self.pid, self.supervisor_pid)
        self._escapees += [ref for ref in found if ref not in known and ref.pid not in ours]

    def signal_group(self, sig: int) -> None:
        """Signal the process group and every descendant that left it (through the supervisor),
        and every remembered escapee."""
        self._signal_tree(sig)
        process_tree.signal_refs(self._escapees, sig)

    def kill_pipe_holders(self) -> None:
        """SIGKILL any process of ours that still holds the agent's end of our pipes.

        Only the agent's ends count (its stdin for reading, its stdout and stderr for writing):
        a process forked by the application embedding us inherits our ends, not theirs. Only
        processes of ours count: inside the supervisor's tree or carrying the session mark (an
        ssh connection master someone else started holds our ends but is not ours). Without
        containment any holder is killed, as it can only be a lost descendant. Scans on the
        calling thread: prefer :meth:`kill_pipe_holders_off_loop`.
        """
        process_tree.signal_refs(self._ours_holding_pipes(), signal.SIGKILL)

    async def kill_pipe_holders_off_loop(self) -> None:
        """:meth:`kill_pipe_holders` with the scan in a worker thread."""
        holders = await anyio.to_thread.run_sync(self._ours_holding_pipes)
        process_tree.signal_refs(holders, signal.SIGKILL)

    def _ours_holding_pipes(self) -> list[process_tree.ProcessRef]:
        holders = [ref for ref in process_tree.pipe_holders(self._child_ends) if ref.pid != self.supervisor_pid]
        if not self._sup.reports.contained:
            return holders
        mark = f"{SESSION_MARK}={self._token}"
        return [
            ref
            for ref in holders
            if process_tree.has_ancestor(ref.pid, self.supervisor_pid) or process_tree.carries(ref.pid, mark)
        ]


def _start_error(exc: OSError | ValueError | TypeError, spec: LaunchSpec) -> RemoteAcpError:
    if not isinstance(exc, OSError):  # a NUL byte or a non-string in the argv or environment
        return RemoteAcpError(ErrorKind.PORT_EXIT, f"failed to start the agent subprocess: {exc}")
    if spec.cwd is not None and exc.filename == spec.cwd:
        return RemoteAcpError(
            ErrorKind.INVALID_WORKSPACE_CWD, f"the workspace {spec.cwd!r} cannot be entered: {exc.strerror}"
        )
    if isinstance(exc, FileNotFoundError):
        return RemoteAcpError(ErrorKind.AGENT_NOT_FOUND, f"agent program {spec.argv[0]!r} was not found")
    if exc.errno in DESCRIPTOR_ERRNOS:
        return out_of_descriptors(exc)
    return RemoteAcpError(ErrorKind.PORT_EXIT, f"failed to start the agent subprocess: {exc.strerror or exc}")
