"""The reattach window's host scripts, run for real under dash, bash and BusyBox ash.

No sshd: a "link" is the step's shell started with pipes in a session of its own (as sshd starts a
login), lost by SIGKILL of its process group or by closing our ends of its pipes (what sshd's exit
does). The controller's side is :class:`~remote_acp.targets.ssh.relay.link.Link`, driven by a
reader thread per link.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import IO, TYPE_CHECKING

import pytest

from remote_acp.errors import Cause
from remote_acp.targets.ssh.relay.attach import (
    END_MARK,
    EXIT_ATTACHED_ELSEWHERE,
    EXIT_NO_SESSION,
    EXIT_WRONG_SECRET,
    attach_script,
)
from remote_acp.targets.ssh.relay.host_check import host_check_script, parse_host_check
from remote_acp.targets.ssh.relay.link import Link, parse_attach_reply, refusal_error
from remote_acp.targets.ssh.relay.start import start_script
from tests.support.processes import marked, read_line, wait_for

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.process

SEGMENT = 128 * 1024
BOUND = 512 * 1024
BUSYBOX = shutil.which("busybox")

AGENT = r"""
import os, sys, threading, time
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
"""


@pytest.fixture(params=["dash", "bash", "busybox"])
def shell(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    """The shell's words and the environment (the test's own, so the orphan check sees every
    process): BusyBox gets a PATH of its applets only (and util-linux flock, which Debian's
    BusyBox lacks)."""
    env = dict(os.environ)
    if request.param == "dash":
        return ["dash"], env
    if request.param == "bash":
        return ["bash"], env
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
    def __init__(self, line: bytes, status: int) -> None:
        super().__init__(f"{line!r} (exit {status})")
        self.status = status


class Controller:
    """A controller: a :class:`Link` and the current connection (a local shell standing in for ssh)."""

    def __init__(self, sh: list[str], env: dict[str, str], base: Path, *, secret: str | None = None) -> None:
        self.sh, self.env, self.base = sh, env, base
        self.sid = secrets.token_hex(6)
        self.secret = secret or secrets.token_hex(16)
        self.link = Link(self.sid, self.secret, ack_every=64 * 1024)
        self.out = bytearray()
        self.proc: subprocess.Popen[bytes] | None = None
        self.lock = threading.Lock()
        self.end: bytes | None = None
        self.readers: list[threading.Thread] = []
        self.links: list[subprocess.Popen[bytes]] = []

    @property
    def directory(self) -> Path:
        return self.base / f"s-{self.sid}"

    def _connect(self, script: str, first: bytes, args: list[str]) -> None:
        proc = subprocess.Popen(
            [*self.sh, "-c", script, "ra", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env,
            start_new_session=True,
            bufsize=0,
        )
        self.links.append(proc)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write(first)
        try:
            header = read_line(proc.stdout, within=10, what="the attachment's header")
        except EOFError:
            proc.stdin.close()
            raise Refused(b"", proc.wait(10)) from None
        if not header.startswith(b"RA-ATTACHED"):
            proc.stdin.close()
            raise Refused(header, proc.wait(10))
        with self.lock:
            proc.stdin.write(self.link.attached(parse_attach_reply(header)))
            self.proc = proc
        for target, stream in ((self._read, proc.stdout), (self._errors, proc.stderr)):
            thread = threading.Thread(target=target, args=(proc, stream), daemon=True)
            thread.start()
            self.readers.append(thread)

    def start(self, agent: list[str], *, window_s: int = 3) -> None:
        script = start_script(
            str(self.base),
            window_s=window_s,
            capacity=2,
            grace_s=1,
            segment=SEGMENT,
            bound=BOUND,
            shell=" ".join(self.sh),
            check_host=False,
        )
        self._connect(script, self.link.start_request(), agent)

    def attach(self, *, takeover: bool = True) -> None:
        script = attach_script(str(self.base), segment=SEGMENT, bound=BOUND)
        self._connect(script, self.link.attach_request(takeover=takeover), [])

    def _read(self, proc: subprocess.Popen[bytes], stream: IO[bytes]) -> None:
        while chunk := stream.read(65536):
            with self.lock:
                if proc is not self.proc:
                    return
                self.out += self.link.received_bytes(chunk)
                self._write(self.link.ack())

    def _errors(self, proc: subprocess.Popen[bytes], stream: IO[bytes]) -> None:
        for line in stream:
            if line.startswith(END_MARK.encode()):
                self.end = line.strip()

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

    def finish(self) -> int:
        """Close the agent's input, take the output to its end, acknowledge it: the exit status."""
        with self.lock:
            self._write(self.link.close_input())
        wait_for(lambda: self.end is not None, "the end of the agent's output", within=15)
        assert self.end is not None
        total = int(self.end.split(b"out=")[1].split()[0])
        wait_for(lambda: self.link.received >= total, "every byte of the output", within=10)
        proc = self.proc
        assert proc is not None and proc.stdin is not None
        with self.lock:
            self._write(self.link.ack(force=True))
        proc.stdin.close()
        return proc.wait(10)

    def close(self) -> None:
        for proc in self.links:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        for reader in self.readers:
            reader.join(10)


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


@pytest.fixture
def base(tmp_path: Path) -> Path:
    path = tmp_path / "slots"
    path.mkdir(mode=0o700)
    return path


def test_a_stream_survives_two_link_losses_with_every_line_once_and_input_applied_once(
    shell: tuple[list[str], dict[str, str]], base: Path
) -> None:
    c = Controller(*shell, base)
    applied = base.parent / "applied"
    lines = 250
    try:
        c.start([sys.executable, "-c", AGENT, "stream", str(lines), "100", str(applied)])
        sent = [b"message %d %s\n" % (i, b"y" * 40) for i in range(6)]
        c.send(sent[0])
        wait_for(lambda: len(c.out) > 5000, "output before the first cut")
        c.send(sent[1], partial=10)  # a frame cut in the middle by the link's loss
        c.cut("kill")
        c.send(sent[2])  # while detached: kept, and sent on the reattach
        time.sleep(0.3)
        c.attach()
        c.send(sent[3])
        wait_for(lambda: len(c.out) > 12000, "output before the second cut")
        c.cut("close")
        c.send(sent[4])
        c.attach()
        c.send(sent[5])
        assert c.finish() == 0
        seqs = [int(m) for m in re.findall(rb'"seq":(\d+),', bytes(c.out))]
        assert seqs == list(range(lines)), "lines missing, repeated or out of order"
        assert bytes(c.out).count(b"\n") == lines
        assert applied.read_bytes() == b"".join(sent)
        wait_gone(c, within=10)
    finally:
        c.close()


def test_a_flood_while_detached_blocks_the_agent_at_the_bound_and_loses_nothing(
    shell: tuple[list[str], dict[str, str]], base: Path
) -> None:
    c = Controller(*shell, base)
    progress = base.parent / "progress"
    total = 3 * 1024 * 1024
    try:
        c.start([sys.executable, "-c", AGENT, "flood", str(total), str(progress)], window_s=10)
        wait_for(progress.exists, "the agent's first write")
        c.cut("kill")
        received = len(c.out)
        samples: list[int] = []

        def settled() -> bool:
            samples.append(int(progress.read_text() or 0))
            time.sleep(0.3)
            return len(samples) > 3 and samples[-1] == samples[-4]

        wait_for(settled, "the agent to block", within=10)
        written = samples[-1]
        assert written < total, "the agent was never blocked"
        spooled = sum(f.stat().st_size for f in c.directory.glob("o.*"))
        assert spooled <= BOUND + SEGMENT + 65536
        # what the agent wrote past what we had: the spool, and the pipes between (a few blocks)
        assert written - received <= BOUND + 8 * 65536
        assert session_processes(c.sid), "the agent was killed"
        c.attach()
        wait_for(lambda: len(c.out) >= total, "the whole flood", within=15)
        assert c.finish() == 0
        block = bytes(range(256)) * 256
        want = (block * (total // len(block) + 1))[:total]
        assert hashlib.sha256(bytes(c.out)).digest() == hashlib.sha256(want).digest()
        wait_gone(c, within=10)
    finally:
        c.close()


def test_after_the_window_nothing_remains_and_a_late_attach_is_refused(
    shell: tuple[list[str], dict[str, str]], base: Path
) -> None:
    c = Controller(*shell, base)
    try:
        c.start([sys.executable, "-c", AGENT, "idle"], window_s=2)
        wait_for(lambda: len(session_processes(c.sid)) >= 3, "the agent, its child and its daemon")
        assert not slot_free(base)
        c.cut("kill")
        time.sleep(1)
        assert c.directory.exists() and session_processes(c.sid), "ended inside the window"
        wait_gone(c, within=12)
        with pytest.raises(Refused) as refused:
            c.attach()
        assert refused.value.status == EXIT_NO_SESSION
    finally:
        c.close()


def test_a_wrong_secret_and_a_second_controller_are_refused(
    shell: tuple[list[str], dict[str, str]], base: Path
) -> None:
    c = Controller(*shell, base)
    thief = Controller(*shell, base)
    other = Controller(*shell, base)
    try:
        c.start([sys.executable, "-c", AGENT, "stream", "50", "50", str(base.parent / "applied")])
        thief.sid = other.sid = c.sid
        thief.link = Link(c.sid, "f" * 32)
        other.link = Link(c.sid, c.secret)  # the same secret, another controller
        with pytest.raises(Refused) as wrong:
            thief.attach()
        assert wrong.value.status == EXIT_WRONG_SECRET
        assert refusal_error(wrong.value.status, "RA-REFUSED wrong secret").cause is Cause.NOT_OWNER
        with pytest.raises(Refused) as elsewhere:
            other.attach(takeover=False)
        assert elsewhere.value.status == EXIT_ATTACHED_ELSEWHERE
        assert c.finish() == 0
        wait_gone(c, within=10)
    finally:
        for controller in (c, thief, other):
            controller.close()


def test_the_host_check_refuses_a_login_the_host_reaps_and_accepts_one_it_does_not(
    tmp_path: Path,
) -> None:
    cgroup = tmp_path / "cgroup"
    cgroup.write_text("0::/user.slice/user-1000.slice/session-7.scope\n")
    conf = tmp_path / "none"
    script = host_check_script(cgroup_file=str(conf), run_user=str(tmp_path / "run"))
    out = subprocess.run(["dash", "-c", script], capture_output=True, text=True, check=True, timeout=10).stdout
    fields = parse_host_check(out.strip())
    assert fields["verdict"] == "ok" and fields["logind"] == "no"
    script = host_check_script(cgroup_file=str(cgroup), run_user=str(tmp_path / "run"))
    out = subprocess.run(["dash", "-c", script], capture_output=True, text=True, check=True, timeout=10).stdout
    assert parse_host_check(out.strip())["scope"] == "session-7.scope"
