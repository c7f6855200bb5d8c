"""The supervisor launcher: one small process per controller that forks each session's supervisor.

The first session of a process starts it (``python -I -S`` running :func:`._supervisor.serve`,
or earlier through :func:`prestart_launcher`); each session then sends it one request over a
``SOCK_SEQPACKET`` socket, the agent's argv, environment, working directory and umask, with the
agent's three pipes, the lifeline and the report pipe as ``SCM_RIGHTS``. The launcher forks;
the fork runs the supervisor exactly as one started on its own would (see :mod:`.containment`).
A fork costs about a millisecond of CPU and shares the launcher's memory, where an interpreter
start-up per session cost 15-20 ms of CPU and 3.5 MiB (PSS).

What cannot come with a request is inherited from this process as it was when the launcher
started: the launcher is replaced when this process's identity (pid, uids, gids, groups) or
open-file limit changed since; other resource limits, the nice value and the cgroup are not
compared. It exits when this process closes its socket, however this process ended; a copy of
this process made by ``os.fork`` drops its copy of the socket at once. At interpreter exit it is
closed and reaped (an ``atexit`` hook), so nothing is left for the garbage collector to warn
about. Where it cannot be used (no ``pidfd_open``: its supervisors are not our children, and only
a pidfd tells when one exits), or does not take or answer a request, the caller starts the
supervisor on its own.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import resource
import socket
import subprocess
import sys
import threading
from array import array
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "FORK_BOUND_S",
    "SUPERVISOR_SCRIPT",
    "USABLE",
    "Launcher",
    "acquire",
    "boot_code",
    "close_launcher",
    "discard",
    "encode_request",
    "prestart_launcher",
]

SUPERVISOR_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_supervisor.py")
FORK_BOUND_S = 10.0
"""How long a launch waits for the launcher's fork before taking it for broken."""
MAX_REQUEST = 1 << 20  # the launcher's receive buffer (``_supervisor.MAX_REQUEST``)


def boot_code(directory: str, entry: str = "main") -> str:
    """``python -c``'s code that runs the supervisor module in ``directory``: ``main`` (one
    supervisor) or ``serve`` (the launcher).

    Imported rather than run as a script: a script is compiled at every start, a module comes
    from its cached bytecode (4 ms of CPU less per start). Appended to the path, so that no
    file beside it can stand in for a standard module.
    """
    return f"import sys; sys.path.append({directory!r}); import _supervisor; _supervisor.{entry}(sys.argv)"


_SERVE = boot_code(os.path.dirname(SUPERVISOR_SCRIPT), "serve")


def encode_request(argv: Sequence[str], env: Mapping[str, str], cwd: str | None) -> bytes | None:
    """The launcher's request for ``argv`` (``_supervisor.serve``'s format), or None when the
    launcher cannot take it (no working directory to name, or too large for one message).

    :raises ValueError: for what ``subprocess`` refuses too.
    """
    entries: list[bytes] = []
    for name, value in env.items():
        key = os.fsencode(name)
        if not key or b"=" in key:
            raise ValueError("illegal environment variable name")
        entries.append(key + b"=" + os.fsencode(value))
    fields = [os.fsencode(arg) for arg in argv] + entries
    if any(b"\0" in field for field in fields):
        raise ValueError("embedded null byte")
    if cwd is None:
        try:
            cwd = os.getcwd()
        except OSError:
            return None  # ours was removed: only an inherited one can still name it
    if b"\0" in os.fsencode(cwd):
        raise ValueError("embedded null byte")
    head = [str(_umask()).encode(), os.fsencode(cwd), str(len(argv)).encode()]
    request = b"\0".join(head + fields)
    return request if len(request) <= MAX_REQUEST else None


def _umask() -> int:
    """This process's umask, read without changing it (``os.umask`` would, for every thread);
    -1 where the kernel does not say (the launcher's, inherited, then stands)."""
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return -1


def _identity() -> tuple[object, ...]:
    """What a launcher inherited from this process at its start and passes on to every agent:
    a launcher started under another identity or other limits (or by a parent of this process
    before a fork) is replaced."""
    return (
        os.getpid(),
        os.getuid(),
        os.geteuid(),
        os.getgid(),
        os.getegid(),
        tuple(os.getgroups()),
        resource.getrlimit(resource.RLIMIT_NOFILE),
    )


class Launcher:
    """The controller's handle on its launcher: the process and our end of its socket."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {name: os.environ[name] for name in ("LD_LIBRARY_PATH",) if name in os.environ}
        try:
            self.popen = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _SERVE, str(theirs.fileno())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,  # none of ours: the agents' environments come with each request
                cwd="/",
                start_new_session=True,
                close_fds=True,
                pass_fds=(theirs.fileno(),),
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        with contextlib.suppress(OSError):  # room for any request up to the launcher's buffer
            ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, MAX_REQUEST)
        self.sock = ours
        self.identity = _identity()
        self.dead = False

    def serves_us(self) -> bool:
        """Alive, and started by this process as it is now."""
        return not self.dead and self.popen.poll() is None and self.identity == _identity()

    def send(self, request: bytes, fds: Sequence[int]) -> bool:
        """Hand the request over, never waiting; ``False`` if it was not taken (too large, or a
        queue full of requests), after which :attr:`dead` says whether the launcher is gone."""
        try:
            self.sock.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array("i", fds))], socket.MSG_DONTWAIT)
        except OSError as exc:
            self.dead = exc.errno not in (errno.EMSGSIZE, errno.EAGAIN, errno.ENOBUFS, errno.ENOMEM)
            return False
        return True

    def close(self) -> None:
        """End it at once: it keeps nothing, and one that stopped answering must not be waited for."""
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(OSError):
            self.popen.kill()
        self.popen.wait()


def _usable() -> bool:
    """The launcher needs ``pidfd_open`` (Linux 5.3): its supervisors are not our children, and
    only a pidfd tells when one of them exits."""
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return True


USABLE = _usable()


_launcher: Launcher | None = None
_lock = threading.Lock()


def _drop_in_child() -> None:
    """A copy of this process must neither use the parent's launcher nor keep it alive."""
    global _launcher, _lock
    if _launcher is not None:
        with contextlib.suppress(OSError):
            _launcher.sock.close()
        _launcher = None
    _lock = threading.Lock()  # another thread may have held it at the fork


os.register_at_fork(after_in_child=_drop_in_child)


def acquire() -> Launcher | None:
    """This process's launcher, started (or replaced) if need be; None where there can be none."""
    global _launcher
    if not USABLE:
        return None
    with _lock:
        launcher = _launcher
        if launcher is not None and launcher.serves_us():
            return launcher
        _launcher = None
        if launcher is not None:
            launcher.close()
        try:
            _launcher = Launcher()
        except OSError:
            return None
        return _launcher


def discard(launcher: Launcher) -> None:
    """End ``launcher`` (it took a request and did not answer it, or it is gone); the next
    launch starts another."""
    global _launcher
    with _lock:
        if _launcher is launcher:
            _launcher = None
    launcher.close()


def prestart_launcher() -> None:
    """Start the launcher now, so its own start-up runs beside the caller's rather than before
    the first session's supervisor. A launcher that cannot start costs nothing here."""
    acquire()


def close_launcher() -> None:
    """End this process's launcher, if it has one (the next session starts another). Sessions
    that are running keep their supervisors. Ending the process does the same."""
    global _launcher
    with _lock:
        launcher, _launcher = _launcher, None
    if launcher is not None:
        launcher.close()


# Without it the socket and the Popen are left to the interpreter's teardown, which warns
# (ResourceWarning under ``python -X dev``) that both were still open and the launcher running.
atexit.register(close_launcher)
