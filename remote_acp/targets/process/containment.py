"""Containment: nothing an agent starts outlives the session or the process that opened it.

Theory of operation: the agent is not our child but the child of a small supervisor process
(:mod:`remote_acp.targets.process._supervisor`, a stdlib-only module run with ``python -I -S``) that
stands between this process (the controller) and the agent. The supervisor

- makes itself a *child subreaper* (Linux ``PR_SET_CHILD_SUBREAPER``): a descendant whose
  parent dies is reparented to it, not to init, whether it called ``setsid``, double-forked or
  scrubbed its environment. Every descendant therefore stays inside the supervisor's tree, which
  it walks through ``/proc/PID/task/TID/children`` (no scan of every process);
- forks the agent, which calls ``setsid``: the agent still leads its own session and process
  group, so the group can be signalled as one;
- holds a *lifeline*: a pipe whose write end only the controller holds (close-on-exec). End of
  file on it means the controller is gone however it ended, SIGKILL and the OOM killer
  included, and the supervisor then kills the whole tree and exits. The same pipe carries the
  controller's commands (``T``: SIGTERM to the tree, ``K``: kill the tree and exit). A copy of
  the controller made by ``os.fork`` (``multiprocessing``'s fork workers) closes its inherited
  copy at once (``os.register_at_fork``), so it cannot keep the tree alive; a fork made in C,
  outside Python, is not covered;
- reports back on a second pipe: the agent's pid once its exec succeeded, the agent's exit
  status (peeked with ``WNOWAIT``: the zombie keeps the pid and group id reserved until the
  tree is killed), and, by closing it, that it is gone. Its exit after ``K`` means the whole
  tree is gone.

Why a process and not the kernel's other tools: a cgroup needs a delegated hierarchy that an
ordinary user rarely has; making the controller itself a subreaper would hand it every orphan
of the embedding application; ``PR_SET_PDEATHSIG`` follows the thread that forked, not the
process (a session started from a worker thread would die with that thread), and on the agent
alone covers none of its descendants.

The supervisors come from a *launcher* (:mod:`.fork_server`): a small process, one per controller,
that forks a supervisor for each session on request, about a millisecond each, where an
interpreter start-up per session cost 15-20 ms of CPU. Where it cannot serve, a supervisor starts
on its own as an interpreter of its own, with the same behaviour.

What is guaranteed where:

- Linux: every descendant of the agent is killed at teardown and when the controller dies,
  including ones that left the process group or session, double-forked, or dropped the session
  mark from their environment. A process the agent had started by someone else (a daemon asked
  over a socket) is not its descendant and is not contained.
- Elsewhere (no subreaper, no ``/proc``): the lifeline still kills the agent's process group when
  the controller dies, and teardown signals the group; a descendant that left the group is
  found by the session-mark scan only where ``/proc`` exists (see :mod:`.tree`).
- If the supervisor itself is SIGKILLed, its tree is reparented upwards uncontained; teardown
  then falls back to the group, the mark scan and the pipe holders, as before containment.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from ..exit_status import ExitStatus
from . import fork_server
from .fork_server import SUPERVISOR_SCRIPT, boot_code, close_launcher

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

__all__ = ["SUPERVISOR_SCRIPT", "StartFailed", "Supervisor", "boot_code", "close_launcher"]

_BOOT = boot_code(os.path.dirname(SUPERVISOR_SCRIPT))
_POLL_INTERVAL = 0.01

_lifelines: set[int] = set()
"""Our open lifeline ends: a forked copy of this process must not hold them."""


def _drop_lifelines_in_child() -> None:
    for fd in _lifelines:
        with contextlib.suppress(OSError):
            os.close(fd)
    _lifelines.clear()


os.register_at_fork(after_in_child=_drop_lifelines_in_child)


class StartFailed(Exception):
    """The agent could not be started: ``step`` is ``chdir`` or ``exec``, with the OS error."""

    def __init__(self, step: str, error: OSError) -> None:
        super().__init__(step, error)
        self.step = step
        self.error = error


@dataclass(slots=True)
class _Reports:
    """What the supervisor has told us so far."""

    contained: bool = False
    supervisor_pid: int | None = None
    agent_pid: int | None = None
    failure: StartFailed | None = None
    exit_status: ExitStatus | None = None
    eof: bool = False


class Supervisor:
    """The controller's handle on one supervisor: its process, the lifeline and the reports."""

    def __init__(self, popen: subprocess.Popen[bytes] | None, lifeline: int, reports: int, cwd: str | None) -> None:
        self._popen = popen  # None: forked by the launcher, not our child
        self._lifeline: int | None = lifeline
        self._reports_fd: int | None = reports
        self._cwd = cwd
        self._buffer = b""
        self.reports = _Reports()
        self._pidfd: int | None = None
        self._exited = False
        if popen is not None:
            self._watch(popen.pid)

    def _watch(self, pid: int) -> None:
        self.reports.supervisor_pid = pid
        try:
            self._pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            self._exited = True  # forked by the launcher, gone already (and reaped by it)
        except (AttributeError, OSError):
            self._pidfd = None  # pre-5.3 kernels and non-Linux systems: poll instead

    @property
    def pid(self) -> int:
        pid = self.reports.supervisor_pid
        assert pid is not None
        return pid

    @classmethod
    def launch(
        cls,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | None,
        stdin: int,
        stdout: int,
        stderr: int,
    ) -> Supervisor:
        """Start the supervisor, which starts ``argv``; the pipes become the agent's.

        The launcher forks it when it can (see :func:`_through_launcher`); otherwise it is an
        interpreter of its own, in a process group of its own, so a terminal's Ctrl-C reaches the
        controller (which decides what a cancel means) and not the supervisor or the agent.

        :raises ValueError: a NUL byte in ``argv`` or ``env``, or an ``=`` in a variable's name.
        """
        request = fork_server.encode_request(argv, env, cwd)
        launched = _through_launcher(request, (stdin, stdout, stderr), cwd) if request is not None else None
        if launched is not None:
            return launched
        life_r, life_w = os.pipe()
        _lifelines.add(life_w)  # at once: another thread may fork while we start
        rep_r, rep_w = os.pipe()
        try:
            popen = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _BOOT, str(life_r), str(rep_w), str(os.getpid()), cwd or ""]
                + ["--", *argv],
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                env=env,
                start_new_session=True,
                close_fds=True,
                pass_fds=(life_r, rep_w),
            )
        except BaseException:
            _lifelines.discard(life_w)
            for fd in (life_r, life_w, rep_r, rep_w):
                os.close(fd)
            raise
        os.close(life_r)
        os.close(rep_w)
        return cls(popen, life_w, rep_r, cwd)

    def _wait_forked(self, bound: float) -> bool:
        """Block until the launcher said it forked us (or could not); ``False`` if it said
        nothing within ``bound`` seconds or closed the pipe: it is broken."""
        return self._read_until(lambda: self.reports.supervisor_pid is not None, bound)

    def _read_until(self, reported: Callable[[], bool], bound: float | None = None) -> bool:
        """Read reports, blocking, until ``reported()`` or a failure is, the supervisor is gone,
        or ``bound`` seconds passed; whether ``reported()`` or a failure is."""
        fd = self._reports_fd
        assert fd is not None
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        deadline = None if bound is None else time.monotonic() + bound
        while not (reported() or self.reports.failure is not None):
            left = None if deadline is None else deadline - time.monotonic()
            if self.reports.eof or (left is not None and left <= 0):
                return False
            if poller.poll(None if left is None else left * 1000):
                try:
                    self._feed(os.read(fd, 4096))
                except InterruptedError:
                    pass
        return True

    # -- reports ------------------------------------------------------------------------------

    def wait_started_blocking(self) -> int:
        """Block until the agent's exec succeeded; its pid.

        :raises StartFailed: when the agent could not be started.
        """
        self._read_until(lambda: self.reports.agent_pid is not None)
        return self._started()

    async def wait_started(self) -> int:
        """Wait, without blocking the event loop, until the agent's exec succeeded; its pid.

        :raises StartFailed: when the agent could not be started.
        """
        fd = self._reports_fd
        assert fd is not None
        os.set_blocking(fd, False)
        while self.reports.agent_pid is None and self.reports.failure is None and not self.reports.eof:
            if not self.read_available():
                break
            if self.reports.agent_pid is None and self.reports.failure is None:
                await anyio.wait_readable(fd)
        return self._started()

    def _started(self) -> int:
        if self.reports.failure is not None:
            raise self.reports.failure
        if self.reports.agent_pid is None:
            raise StartFailed("exec", OSError(errno.ECHILD, "the supervisor exited before starting the agent"))
        if self._reports_fd is not None:
            os.set_blocking(self._reports_fd, False)
        return self.reports.agent_pid

    def read_available(self) -> bool:
        """Take whatever reports are waiting (non-blocking); ``False`` once the supervisor is gone."""
        fd = self._reports_fd
        if fd is None:
            return False
        while True:
            try:
                data = os.read(fd, 4096)
            except BlockingIOError:
                return True
            except InterruptedError:
                continue
            except OSError:
                data = b""
            self._feed(data)
            if not data:
                return False

    @property
    def reports_fd(self) -> int | None:
        return self._reports_fd

    def _feed(self, data: bytes) -> None:
        if not data:
            self.reports.eof = True
            return
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            self._report(line.decode("ascii", "replace"))

    def _report(self, line: str) -> None:
        kind, rest = line[:1], line[1:]
        if kind == "S" and self._popen is None and self.reports.supervisor_pid is None:
            self._watch(int(rest))
        elif kind == "C":
            self.reports.contained = rest == "1"
        elif kind == "P":
            self.reports.agent_pid = int(rest)
        elif kind == "F":
            step, _, number = rest.partition(" ")
            code = int(number or 0)
            where = self._cwd if step == "chdir" else None
            self.reports.failure = StartFailed(step, OSError(code, os.strerror(code), where))
        elif kind == "X":
            exit_code, _, sig = rest.partition(" ")
            if int(sig or 0) > 0:
                self.reports.exit_status = ExitStatus(None, int(sig))
            elif int(exit_code) >= 0:
                self.reports.exit_status = ExitStatus(int(exit_code))
            else:
                self.reports.exit_status = ExitStatus(None)

    # -- commands -----------------------------------------------------------------------------

    def send(self, command: bytes) -> None:
        """``T`` (SIGTERM the tree) or ``K`` (kill the tree and exit); dropped if it is gone."""
        fd = self._lifeline
        if fd is None:
            return
        try:
            os.write(fd, command)
        except OSError:
            pass  # already gone (or the pipe is full of earlier commands, which say as much)

    # -- its own life -------------------------------------------------------------------------

    @property
    def gone(self) -> bool:
        """Whether the supervisor exited (and was reaped, by us or by the launcher)."""
        if self._popen is not None:
            return self._popen.poll() is not None
        if not self._exited and self._pidfd is not None:
            poller = select.poll()
            poller.register(self._pidfd, select.POLLIN)
            self._exited = bool(poller.poll(0))
        # Without a pidfd (out of descriptors when it was forked): its exit closes the reports.
        return self._exited or (self._pidfd is None and not self.read_available())

    async def wait_gone(self, bound: float) -> bool:
        """Wait up to ``bound`` seconds for the supervisor to exit; whether it did."""
        with anyio.move_on_after(bound):
            while not self.gone:
                if self._pidfd is not None:
                    try:
                        await anyio.wait_readable(self._pidfd)
                    except (anyio.ClosedResourceError, OSError):
                        await anyio.sleep(_POLL_INTERVAL)
                else:
                    await anyio.sleep(_POLL_INTERVAL)
        return self.gone

    def close(self) -> None:
        """Close our ends: the lifeline first (the supervisor then kills whatever is left and
        exits), the reports last. A supervisor not yet reaped is reaped by a thread."""
        for name in ("_lifeline", "_pidfd", "_reports_fd"):
            fd = getattr(self, name)
            if fd is not None:
                setattr(self, name, None)
                _lifelines.discard(fd)
                with contextlib.suppress(RuntimeError):  # no event loop: nobody can be waiting
                    anyio.notify_closing(fd)
                os.close(fd)
        if self._popen is not None and not self.gone:
            # Only when teardown skipped kill(): never block the event loop on it.
            threading.Thread(target=self._popen.wait, name="remote-acp supervisor reaper", daemon=True).start()


def _through_launcher(request: bytes, stdio: tuple[int, int, int], cwd: str | None) -> Supervisor | None:
    """A supervisor forked by the launcher, or None when there is none to be had (the caller
    then starts one on its own). A launcher that takes the request and does not answer it, or
    is gone, is ended: the next launch starts another."""
    launcher = fork_server.acquire()
    if launcher is None:
        return None
    life_r, life_w = os.pipe()
    _lifelines.add(life_w)  # at once: another thread may fork while we start
    rep_r, rep_w = os.pipe()
    try:
        sent = launcher.send(request, (*stdio, life_r, rep_w))
    finally:
        os.close(life_r)
        os.close(rep_w)
    sup = Supervisor(None, life_w, rep_r, cwd)
    if sent and sup._wait_forked(fork_server.FORK_BOUND_S):
        return sup
    sup.close()  # the lifeline with it: a supervisor forked late exits at once, starting nothing
    if sent or launcher.dead:  # not taken but alive (a request too large): kept
        fork_server.discard(launcher)
    return None
