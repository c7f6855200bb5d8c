"""The supervisor: the process between a session's controller and its agent (a program of its own).

Forked by the launcher (:func:`serve`, one per controller), or started on its own as ``python -I
-S -c BOOT LIFELINE STATUS CONTROLLER CWD -- ARGV...`` (``BOOT`` imports this module from its
directory and calls :func:`main`; see :mod:`.containment`) with the agent's pipes as
stdin/stdout/stderr and the agent's environment. It imports nothing beyond
``os``, ``select`` and the C modules ``_signal``/``_ctypes`` (and ``_socket`` in the launcher):
``signal`` and ``ctypes`` cost more to import than the whole interpreter start-up, and every
session waits for it.

What it does, in order: make itself a child subreaper (Linux), so every orphaned descendant of
the agent is reparented here instead of to init, whether it called ``setsid`` or double-forked;
fork the agent, which calls ``setsid``
(it leads its own session and process group, as before) and execs; report ``P<pid>`` once the
exec succeeded (``F<step> <errno>`` if it failed); give its own copies of the pipes up, so end
of stream means the agent's side closed them. Then it waits:

- its children exiting: the agent's status is peeked (``WNOWAIT``) and reported ``X<code>
  <signal>``; the zombie is kept, so the agent's pid and group id cannot be reused while anyone
  may still signal them. Orphans reparented here are reaped as they exit.
- the lifeline (a pipe whose write end only the controller holds): ``T`` sends SIGTERM to the
  agent's group and every descendant; ``K`` kills everything; end of file (the controller
  exited, however it died) kills everything too. SIGTERM or SIGHUP to the supervisor likewise.

Killing everything is SIGKILL to the group and to every descendant found through
``/proc/PID/task/TID/children``, repeated until none is alive; then the agent is reaped and the
supervisor exits, so its exit means the tree is gone. Without ``/proc`` (not Linux) the
descendants are the agent's group only.
"""

from __future__ import annotations

import os
import select
import sys

__all__ = ["main"]

TYPE_CHECKING = False  # the typing module alone costs more than this whole script's start-up
if TYPE_CHECKING:
    import signal as _signal
    from collections.abc import Callable
    from typing import Any, NoReturn
else:
    import _signal  # the C module: ``signal`` builds its enums at import

PR_SET_CHILD_SUBREAPER = 36
KILL_RETRY_MS = 10

_stop_requested = False


def _on_signal(signum: int, frame: object) -> None:
    global _stop_requested
    if signum != _signal.SIGCHLD:
        _stop_requested = True


def _prctl() -> Callable[[int, int], bool] | None:
    """libc's prctl through the bare ``_ctypes`` module, or None where there is none."""
    try:
        import _ctypes

        ct: Any = _ctypes  # typeshed types ctypes' public face, not this bare module

        class CInt(ct._SimpleCData):  # type: ignore[misc]
            _type_ = "i"

        class CULong(ct._SimpleCData):  # type: ignore[misc]
            _type_ = "L"

        class Libc:
            _handle = ct.dlopen(None, os.RTLD_NOW)

        class Fn(ct.CFuncPtr):  # type: ignore[misc]
            _flags_ = ct.FUNCFLAG_CDECL
            _restype_ = CInt

        fn = Fn(("prctl", Libc))
    except Exception:
        return None

    def prctl(option: int, arg: int) -> bool:
        return bool(fn(CInt(option), CULong(arg), CULong(0), CULong(0), CULong(0)) == 0)

    return prctl


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                kids += [int(word) for word in f.read().split()]
        except (OSError, ValueError):
            pass
    return kids


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return False
    return raw[raw.rindex(b")") + 2 : raw.rindex(b")") + 3] not in (b"Z", b"X")


class SupervisedTree:
    """The agent this supervisor forked and the tree below it, with the pipe its reports go back on
    (the controller's side of the same supervisor is :class:`.containment.Supervisor`)."""

    def __init__(self, agent: int, status_fd: int, procfs: bool) -> None:
        self.agent = agent
        self.status_fd: int | None = status_fd
        self.procfs = procfs
        self.agent_exited = False

    def report(self, text: str) -> None:
        if self.status_fd is not None:
            try:
                os.write(self.status_fd, text.encode())
            except OSError:
                self.status_fd = None  # the controller is gone; carry on cleaning up

    def peek_agent(self) -> None:
        if self.agent_exited:
            return
        try:
            info = os.waitid(os.P_PID, self.agent, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            self.agent_exited = True
            self.report("X-1 0\n")
            return
        if info is None:
            return
        self.agent_exited = True
        if info.si_code == os.CLD_EXITED:
            self.report(f"X{info.si_status} 0\n")
        else:
            self.report(f"X-1 {info.si_status}\n")

    def reap_orphans(self) -> None:
        for pid in _children(os.getpid()):
            if pid != self.agent:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass

    def signal_tree(self, sig: int) -> int:
        """Signal the agent's group and every descendant; the number still alive."""
        try:
            os.killpg(self.agent, sig)
        except OSError:
            pass
        if not self.procfs:
            return 0 if self.agent_exited else 1
        alive = 0
        frontier = _children(os.getpid())
        while frontier:
            pid = frontier.pop()
            frontier += _children(pid)
            if pid == self.agent and self.agent_exited:
                continue
            try:
                os.kill(pid, sig)
            except OSError:
                continue
            if _alive(pid):
                alive += 1
        return alive


def _start_agent(command: list[str] | list[bytes], cwd: str, err_w: int, env: dict[bytes, bytes] | None) -> NoReturn:
    """In the forked child: a session of its own, default signals, then exec (never returns)."""
    step = "setsid"
    try:
        os.setsid()
        _signal.set_wakeup_fd(-1)
        for sig in (_signal.SIGCHLD, _signal.SIGTERM, _signal.SIGHUP, _signal.SIGINT, _signal.SIGPIPE):
            _signal.signal(sig, _signal.SIG_DFL)
        if hasattr(_signal, "SIGXFSZ"):
            _signal.signal(_signal.SIGXFSZ, _signal.SIG_DFL)
        if cwd:
            step = "chdir"
            os.chdir(cwd)
        step = "exec"
        if env is None:
            os.execvp(command[0], command)
        os.execvpe(command[0], command, env)
    except OSError as exc:
        os.write(err_w, f"F{step} {exc.errno or 0}\n".encode())
    finally:
        os._exit(127)


def main(argv: list[str]) -> NoReturn:
    """A supervisor started on its own: ``LIFELINE STATUS CONTROLLER CWD -- ARGV...``, with the
    agent's pipes as stdio and its environment as ours."""
    lifeline, status_fd, controller = int(argv[1]), int(argv[2]), int(argv[3])
    _supervise(lifeline, status_fd, argv[4], argv[6:], None, _prctl(), lambda: os.getppid() == controller)


def _supervise(
    lifeline: int,
    status_fd: int,
    cwd: str,
    command: list[str] | list[bytes],
    env: dict[bytes, bytes] | None,
    prctl: Callable[[int, int], bool] | None,
    controller_alive: Callable[[], bool],
) -> NoReturn:
    os.set_inheritable(lifeline, False)
    os.set_inheritable(status_fd, False)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    _signal.set_wakeup_fd(wake_w)
    for sig in (_signal.SIGCHLD, _signal.SIGTERM, _signal.SIGHUP):
        _signal.signal(sig, _on_signal)  # SIGCHLD must not stay ignored (inherited SIG_IGN)
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
    contained = bool(prctl and prctl(PR_SET_CHILD_SUBREAPER, 1))
    if not controller_alive():
        os._exit(1)  # the controller died before we could watch it: nothing was started
    err_r, err_w = os.pipe()
    agent = os.fork()
    if agent == 0:
        _start_agent(command, cwd, err_w, env)
    os.close(err_w)
    failure = b""
    while chunk := os.read(err_r, 256):  # end of file: the exec succeeded
        failure += chunk
    os.close(err_r)
    if failure:
        os.waitpid(agent, 0)
        os.write(status_fd, failure)
        os._exit(0)
    tree = SupervisedTree(agent, status_fd, os.path.isdir(f"/proc/{os.getpid()}/task"))
    tree.report(f"C{int(contained)}\nP{agent}\n")
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    os.chdir("/")

    poller = select.poll()
    poller.register(lifeline, select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    killing = False
    while True:
        for fd, _ in poller.poll(KILL_RETRY_MS if killing else None):
            if fd == wake_r:
                try:
                    os.read(wake_r, 4096)
                except OSError:
                    pass
                continue
            try:
                data = os.read(lifeline, 64)
            except OSError:
                data = b""
            if not data:  # the controller is gone, however it died
                poller.unregister(lifeline)
                killing = True
            elif b"K" in data:
                killing = True
            elif b"T" in data:
                tree.signal_tree(_signal.SIGTERM)
        killing = killing or _stop_requested
        tree.peek_agent()
        tree.reap_orphans()
        if killing and tree.signal_tree(_signal.SIGKILL) == 0 and tree.agent_exited:
            tree.reap_orphans()
            try:
                os.waitpid(agent, 0)
            except ChildProcessError:
                pass
            os._exit(0)


# --------------------------------------------------------------------------- the launcher

REQUEST_FDS = 5
"""Passed with each request: the agent's stdin, stdout and stderr, the lifeline, the status pipe."""
MAX_REQUEST = 1 << 20


def serve(argv: list[str]) -> NoReturn:
    """The launcher: one per controller, it forks a supervisor for each request on the control
    socket (fd ``argv[1]``, a ``SOCK_SEQPACKET`` socket: one message per request) and exits when
    the controller closes it, however the controller ended.

    A request is the umask (``-1``: keep ours), the working directory, the argument count, the
    arguments and the ``NAME=VALUE`` environment entries, separated by NUL bytes, with the five
    descriptors of :data:`REQUEST_FDS`. The launcher reports ``S<pid>`` (or ``Ffork <errno>``)
    on the request's status pipe; the supervisor reports the rest as :func:`main`'s does. A
    fork of this small process costs about a millisecond, against an interpreter start-up of
    tens of milliseconds for each supervisor started on its own.
    """
    import _socket

    control = _socket.socket(fileno=int(argv[1]))
    os.set_inheritable(control.fileno(), False)
    _signal.signal(_signal.SIGCHLD, _signal.SIG_IGN)  # the kernel reaps the supervisors
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
    os.chdir("/")
    prctl = _prctl()
    space = _socket.CMSG_SPACE(REQUEST_FDS * 4)
    while True:
        try:
            data, ancillary, flags, _ = control.recvmsg(MAX_REQUEST, space)
        except InterruptedError:
            continue
        except OSError:
            os._exit(0)
        fds = [
            int.from_bytes(cdata[i : i + 4], sys.byteorder)
            for level, kind, cdata in ancillary
            if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS
            for i in range(0, len(cdata) - len(cdata) % 4, 4)
        ]
        if not data and not fds:
            os._exit(0)  # end of file: the controller is gone
        if len(fds) == REQUEST_FDS and not flags & (_socket.MSG_TRUNC | _socket.MSG_CTRUNC):
            _fork_supervisor(control.fileno(), data, fds, prctl)
        for fd in fds:  # a malformed request is dropped: its status pipe ends without a word
            os.close(fd)


def _fork_supervisor(control: int, request: bytes, fds: list[int], prctl: Callable[[int, int], bool] | None) -> None:
    stdin, stdout, stderr, lifeline, status = fds
    try:
        pid = os.fork()
    except OSError as exc:
        _write(status, f"Ffork {exc.errno or 0}\n")
        return
    if pid == 0:
        try:
            os.close(control)
            for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
                os.dup2(fd, target)
            for fd in (stdin, stdout, stderr):
                os.close(fd)
            fields = request.split(b"\0")
            umask, cwd, argc = int(fields[0]), os.fsdecode(fields[1]), int(fields[2])
            command = fields[3 : 3 + argc]
            env = dict(entry.split(b"=", 1) for entry in fields[3 + argc :] if entry)
            if umask >= 0:
                os.umask(umask)
            _supervise(lifeline, status, cwd, command, env, prctl, lambda: not _hung_up(lifeline))
        finally:
            os._exit(1)
    _write(status, f"S{pid}\n")


def _hung_up(fd: int) -> bool:
    """Whether every write end of the pipe ``fd`` is closed (the controller is gone)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return any(event & select.POLLHUP for _, event in poller.poll(0))


def _write(fd: int, text: str) -> None:
    try:
        os.write(fd, text.encode())
    except OSError:
        pass


if __name__ == "__main__":
    main(sys.argv)
