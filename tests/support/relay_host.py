"""What the reattach window's host tests share (tests/test_relay_*.py): the shells, a stand-in
agent, and a controller driving real host scripts through pipes.

No sshd: a "link" is the step's shell started with pipes in a session of its own (as sshd starts a
login), lost by SIGKILL of its process group or by closing our ends of its pipes (what sshd's exit
does). The controller's side is :class:`~remote_acp.targets.ssh.relay.link.Link`, driven by a
reader thread per link. A controller reaches the host in the ways the ssh target does: the start
step or the attach step run directly (``sh -c TEXT``), or the session script and the reconnect's
login sent through the loader (``sh -c BOOTSTRAP``, the script on stdin), answered with ``go`` and
the request in one write once the ready marker came.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import signal
import subprocess
import threading
import time
from typing import IO, TYPE_CHECKING

import pytest

from remote_acp.targets.ssh.loader import BOOTSTRAP, stdin_prefix
from remote_acp.targets.ssh.relay.attach import END_MARK, attach_script
from remote_acp.targets.ssh.relay.link import AttachReply, Link, parse_attach_reply
from remote_acp.targets.ssh.relay.login import attach_login_script
from remote_acp.targets.ssh.relay.start import start_script
from tests.support.processes import alive, marked, read_line, wait_for

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "AGENT",
    "BOUND",
    "MARKER",
    "SEGMENT",
    "SHELLS",
    "Controller",
    "Refused",
    "session_processes",
    "shell_env",
    "slot_free",
    "wait_gone",
]

SEGMENT = 128 * 1024
BOUND = 512 * 1024
SHELLS = ["dash", "bash", "busybox"]
MARKER = "rdy-relay"
BUSYBOX = shutil.which("busybox")

AGENT = r"""
import json, os, signal, sys, threading, time
mode = sys.argv[1]
if mode == "stream":
    n, rate, applied = int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    def reader():
        with open(applied, "ab", buffering=0) as log:
            for line in sys.stdin.buffer:
                log.write(line)
    t = threading.Thread(target=reader); t.start()
    t0 = time.monotonic()
    for i in range(n):
        os.write(1, b'{"seq":%d,"pad":"%s"}\n' % (i, b"x" * 80))
        d = t0 + (i + 1) / rate - time.monotonic()
        if d > 0:
            time.sleep(d)
    t.join()
elif mode == "flood":
    total, progress = int(sys.argv[2]), sys.argv[3]
    block = bytes(range(256)) * 256
    sent = 0
    while sent < total:
        sent += os.write(1, block[: min(len(block), total - sent)])
        with open(progress + ".tmp", "w") as f:
            f.write(str(sent))
        os.replace(progress + ".tmp", progress)
    sys.stdin.read()
elif mode == "idle":
    import subprocess
    subprocess.Popen(["sleep", "1000"])
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execvp("sleep", ["sleep", "1001"])
        os._exit(0)
    sys.stdin.read()
elif mode == "echo":
    # Where it runs and with what, then each input line back; "exit N" ends it with N, after
    # writing the time it ended to the file named by argv[2] (if any).
    umask = os.umask(0)
    info = {"cwd": os.getcwd(), "argv": sys.argv[2:], "umask": umask, "env": dict(os.environ)}
    os.write(1, json.dumps(info).encode() + b"\n")
    if len(sys.argv) > 3 and sys.argv[3] == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for line in sys.stdin.buffer:
        if line.startswith(b"exit "):
            if len(sys.argv) > 2 and sys.argv[2] != "-":
                with open(sys.argv[2], "w") as f:
                    f.write(repr(time.time()))
            os._exit(int(line.split()[1]))
        os.write(1, b"got " + line)
"""


def shell_env(name: str, tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    """The shell's words and the environment (the test's own, so the orphan check sees every
    process): BusyBox gets a PATH of its applets only (and util-linux flock, which Debian's
    BusyBox lacks)."""
    env = dict(os.environ)
    if name in ("dash", "bash"):
        return [name], env
    if BUSYBOX is None:
        pytest.skip("no busybox")
    bin_dir = tmp_path / "bbin"
    bin_dir.mkdir()
    applets = subprocess.run([BUSYBOX, "--list"], capture_output=True, text=True, check=True).stdout.split()
    for applet in applets:
        (bin_dir / applet).symlink_to(BUSYBOX)
    if "flock" not in applets:
        (bin_dir / "flock").symlink_to(shutil.which("flock") or "/usr/bin/flock")
    env["PATH"] = str(bin_dir)
    return [BUSYBOX, "sh"], env


class Refused(Exception):
    def __init__(self, line: bytes, status: int, err: bytes = b"") -> None:
        super().__init__(f"{line!r} (exit {status}) {err!r}")
        self.line, self.status, self.err = line, status, err


class Controller:
    """A controller: a :class:`Link` and the current connection (a local shell standing in for ssh).

    ``base``: the sessions' directory on the "host" (the slot directory); ``slot_prefix``: what
    the session script and the login are given to find it (``base`` less the user id)."""

    def __init__(self, sh: list[str], env: dict[str, str], base: Path, *, secret: str | None = None) -> None:
        self.sh, self.env, self.base = sh, env, base
        self.sid = secrets.token_hex(6)
        self.secret = secret or secrets.token_hex(16)
        self.link = Link(self.sid, self.secret, ack_every=64 * 1024)
        self.out = bytearray()
        self.proc: subprocess.Popen[bytes] | None = None
        self.lock = threading.Lock()
        self.end: bytes | None = None
        self.end_at: float | None = None
        self.reply: AttachReply | None = None
        """The last header's numbers."""
        self.stderr = bytearray()
        self.readers: list[threading.Thread] = []
        self.links: list[subprocess.Popen[bytes]] = []

    @property
    def directory(self) -> Path:
        return self.base / f"s-{self.sid}"

    @property
    def slot_prefix(self) -> str:
        return str(self.base).removesuffix(str(os.getuid()))

    # -- connections ------------------------------------------------------------------------------

    def _open(self, argv: list[str], first: bytes) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env,
            start_new_session=True,
            bufsize=0,
        )
        self.links.append(proc)
        assert proc.stdin is not None
        proc.stdin.write(first)
        return proc

    def _refused(self, proc: subprocess.Popen[bytes], line: bytes) -> Refused:
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.close()
        status = proc.wait(10)
        return Refused(line, status, proc.stderr.read())

    def _take(self, proc: subprocess.Popen[bytes], request: bytes, *, marker: bool, resume: bool = False) -> None:
        """Read the marker (when the step prints one) and the header; then the link is live."""
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        try:
            if marker:
                for _ in range(100):  # what a preflight or a login script prints comes first
                    if read_line(proc.stdout, within=10, what="the ready marker") == MARKER.encode():
                        break
                proc.stdin.write(b"go\n" + request)  # one write, as the ssh target's
            header = read_line(proc.stdout, within=10, what="the attachment's header")
        except EOFError:
            raise self._refused(proc, b"") from None
        if not header.startswith(b"RA-ATTACHED"):
            raise self._refused(proc, header)
        reply = self.reply = parse_attach_reply(header)
        with self.lock:
            if resume:
                self.link.resumed(reply)
            else:
                proc.stdin.write(self.link.attached(reply))
            self.proc = proc
        for target, stream in ((self._read, proc.stdout), (self._errors, proc.stderr)):
            thread = threading.Thread(target=target, args=(proc, stream), daemon=True)
            thread.start()
            self.readers.append(thread)

    def start(self, agent: list[str], *, window_s: int = 3, capacity: int | None = 2) -> None:
        """The start step, run directly, at ``base``."""
        script = start_script(
            str(self.base),
            window_s=window_s,
            capacity=capacity,
            grace_s=1,
            segment=SEGMENT,
            bound=BOUND,
            shell=" ".join(self.sh),
            check_host=False,
        )
        self._take(self._open([*self.sh, "-c", script, "ra", *agent], self.link.start_request()), b"", marker=False)

    def start_session(self, script: str) -> None:
        """The session script (``remote_script`` with a window and :data:`MARKER`) through the loader."""
        proc = self._open([*self.sh, "-c", BOOTSTRAP], stdin_prefix(script, whole_input=True))
        self._take(proc, self.link.start_request(), marker=True)

    def attach(self, *, takeover: bool = True) -> None:
        """The attach step, run directly."""
        script = attach_script(str(self.base), segment=SEGMENT, bound=BOUND)
        self._take(self._open([*self.sh, "-c", script], self.link.attach_request(takeover=takeover)), b"", marker=False)

    def login(self, *, takeover: bool = True, resume: bool = False, request: bytes | None = None) -> None:
        """The reconnect's login through the loader; ``resume``: as a new controller (``- -``);
        ``request``: this request line instead of the link's."""
        script = attach_login_script(ready_marker=MARKER, slot_prefix=self.slot_prefix)
        proc = self._open([*self.sh, "-c", BOOTSTRAP], stdin_prefix(script, whole_input=True))
        if request is None:
            request = self.link.resume_request() if resume else self.link.attach_request(takeover=takeover)
        self._take(proc, request, marker=True, resume=resume)

    def successor(self) -> Controller:
        """A new controller for this session that knows its secret and nothing else."""
        new = Controller(self.sh, self.env, self.base, secret=self.secret)
        new.sid, new.link = self.sid, Link(self.sid, self.secret, ack_every=64 * 1024)
        return new

    def _read(self, proc: subprocess.Popen[bytes], stream: IO[bytes]) -> None:
        with contextlib.suppress(OSError, ValueError):  # closed under it by a cut
            self._read_until_closed(proc, stream)

    def _read_until_closed(self, proc: subprocess.Popen[bytes], stream: IO[bytes]) -> None:
        while chunk := stream.read(65536):
            with self.lock:
                if proc is not self.proc:
                    return
                self.out += self.link.received_bytes(chunk)
                self._write(self.link.ack())

    def _errors(self, proc: subprocess.Popen[bytes], stream: IO[bytes]) -> None:
        for line in stream:
            self.stderr += line
            if line.startswith(END_MARK.encode()):
                self.end_at = time.time()
                self.end = line.strip()

    # -- frames ---------------------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        if self.proc is None or not data:
            return  # detached: the link keeps the input until the host confirms it
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(data)
        except (BrokenPipeError, ValueError, OSError):
            pass

    def send(self, data: bytes, *, partial: int | None = None) -> None:
        with self.lock:
            frame = self.link.send(data)
            self._write(frame if partial is None else frame[: len(frame) - len(data) + partial])

    def ack_all(self) -> None:
        with self.lock:
            self._write(self.link.ack(force=True))

    def end_session(self) -> None:
        with self.lock:
            self._write(self.link.end_session())

    def cut(self, how: str = "kill") -> None:
        proc = self.proc
        assert proc is not None
        with self.lock:
            self.proc = None
            self.link.detached()
        if how == "kill":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            for stream in (proc.stdin, proc.stdout):
                assert stream is not None
                stream.close()
        proc.wait(10)

    def wait_end(self, within: float = 15) -> int:
        """The output's end: the offset it reports, once every byte of it came."""
        wait_for(lambda: self.end is not None, "the end of the agent's output", within=within)
        assert self.end is not None
        total = int(self.end.split(b"out=")[1].split()[0])
        wait_for(lambda: self.link.received >= total, "every byte of the output", within=10)
        return total

    def finish(self, *, close_input: bool = True) -> int:
        """Close the agent's input, take the output to its end, acknowledge it: the exit status."""
        if close_input:
            with self.lock:
                self._write(self.link.close_input())
        self.wait_end()
        proc = self.proc
        assert proc is not None and proc.stdin is not None
        with self.lock:
            self._write(self.link.ack(force=True))
        proc.stdin.close()
        return proc.wait(10)

    def close(self) -> None:
        """End whatever is left: the links, and (after a failure) the relay and the agent."""
        for proc in self.links:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        for reader in self.readers:
            reader.join(10)
        with contextlib.suppress(OSError, ValueError, IndexError):
            relay = int((self.directory / "relay.pid").read_text().split()[0])
            if alive(relay):
                os.killpg(relay, signal.SIGKILL)
        for pid in session_processes(self.sid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def slot_free(base: Path, k: int = 1) -> bool:
    fd = os.open(base / f"slot-{k}", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def session_processes(sid: str) -> list[int]:
    return marked(f"_RA_SESSION={sid}.")


def wait_gone(c: Controller, within: float) -> None:
    wait_for(
        lambda: not c.directory.exists() and not session_processes(c.sid),
        "the session's directory and processes to be gone",
        within=within,
    )
    assert slot_free(c.base)
