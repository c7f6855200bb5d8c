"""A reconnect's login (relay.login), run for real under dash, bash and BusyBox ash through the
loader as the host runs it: the same controller takes its session over, and a new controller that
knows nothing of it resumes with ``- -`` (the output from what the host had acknowledged, the input
the host has, a line a lost link cut short ended with a newline first)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from remote_acp.targets.ssh.loader import BOOTSTRAP, EXIT_INCOMPLETE, INCOMPLETE_MARK, stdin_prefix
from remote_acp.targets.ssh.relay.attach import EXIT_BAD_REQUEST, EXIT_NO_SESSION, EXIT_OFFSET_GONE
from remote_acp.targets.ssh.relay.link import AttachReply
from remote_acp.targets.ssh.relay.login import attach_login_script
from remote_acp.targets.ssh.script import EXIT_NO_GO
from tests.support.processes import wait_for
from tests.support.relay_host import AGENT, MARKER, SHELLS, Controller, Refused, shell_env, wait_gone

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.process


@pytest.fixture(params=SHELLS)
def shell(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    return shell_env(request.param, tmp_path)


@pytest.fixture
def base(tmp_path: Path) -> Path:
    path = tmp_path / f"slots-{os.getuid()}"
    path.mkdir(mode=0o700)
    return path


@pytest.fixture
def controllers() -> Iterator[list[Controller]]:
    made: list[Controller] = []
    yield made
    for c in made:
        c.close()


def echo_session(made: list[Controller], shell: tuple[list[str], dict[str, str]], base: Path) -> Controller:
    c = Controller(*shell, base)
    made.append(c)
    c.start([sys.executable, "-c", AGENT, "echo", "-"], window_s=10, capacity=None)
    wait_for(lambda: b"\n" in c.out, "the agent's first line")
    return c


def read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def host_input(c: Controller) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(c.directory.glob("i.*")))


def test_the_same_controller_takes_its_session_over_through_the_login(
    shell: tuple[list[str], dict[str, str]], base: Path, controllers: list[Controller]
) -> None:
    c = echo_session(controllers, shell, base)
    c.send(b"one\n")
    wait_for(lambda: c.out.endswith(b"got one\n"), "the first echo")
    c.cut("close")  # half-open: the old attachment may still hold the session; takeover ends it
    c.send(b"two\n")
    c.login(takeover=True)
    c.send(b"three\n")
    wait_for(lambda: c.out.endswith(b"got two\ngot three\n"), "the echoes after the reattach")
    c.send(b"exit 0\n")
    assert c.finish(close_input=False) == 0
    wait_gone(c, within=5)


def test_a_new_controller_resumes_from_the_acknowledged_output_and_ends_a_cut_line(
    shell: tuple[list[str], dict[str, str]], base: Path, controllers: list[Controller]
) -> None:
    c = echo_session(controllers, shell, base)
    first_line = len(c.out)
    c.send(b"one\n")
    wait_for(lambda: c.out.endswith(b"got one\n"), "the first echo")
    c.ack_all()  # the host's ack is where a new controller starts
    acked = len(c.out)
    wait_for(lambda: read(c.directory / "ack") == b"%d\n" % acked, "the host's ack")
    c.send(b"two\n", partial=2)  # the old controller dies with "tw" of its frame sent
    wait_for(lambda: host_input(c) == b"one\ntw", "the cut frame's bytes on the host")
    c.cut("kill")

    new = c.successor()
    controllers.append(new)
    new.login(resume=True)
    assert new.reply == AttachReply(acked, len(b"one\ntw\n"))
    assert host_input(c) == b"one\ntw\n", "the cut line got its end"
    new.send(b"three\n")
    wait_for(lambda: new.out == b"got tw\ngot three\n", "the echoes after the resume")
    assert first_line < acked
    new.send(b"exit 3\n")
    assert new.finish(close_input=False) == 3
    wait_gone(new, within=5)


def test_a_resume_with_whole_lines_adds_nothing_and_bad_requests_are_refused(
    shell: tuple[list[str], dict[str, str]], base: Path, controllers: list[Controller]
) -> None:
    c = echo_session(controllers, shell, base)
    c.send(b"one\n")
    wait_for(lambda: c.out.endswith(b"got one\n"), "the first echo")
    c.cut("kill")
    refusals = {
        b"%s x - attach %s\n": EXIT_BAD_REQUEST,
        b"%s - 0x1 attach %s\n": EXIT_BAD_REQUEST,
        b"%s 0 0 attach %s\n": EXIT_OFFSET_GONE,  # the host has 4 input bytes, not 0
    }
    for request, status in refusals.items():
        bad = c.successor()
        controllers.append(bad)
        with pytest.raises(Refused) as refused:
            bad.login(resume=True, request=request % (c.sid.encode(), c.secret.encode()))
        assert refused.value.status == status
    new = c.successor()
    controllers.append(new)
    new.login(resume=True)
    # nothing was acknowledged: the whole output again, from the first kept byte
    assert new.reply == AttachReply(0, 4)
    assert host_input(c) == b"one\n"
    wait_for(lambda: new.out.endswith(b"got one\n"), "the output from the start")
    new.end_session()
    new.finish()
    wait_gone(new, within=5)
    with pytest.raises(Refused) as gone:
        new.login()
    assert gone.value.status == EXIT_NO_SESSION


def test_the_login_stops_when_a_login_script_ate_its_loader_or_no_go_ahead_comes(tmp_path: Path) -> None:
    script = attach_login_script(ready_marker=MARKER, slot_prefix=str(tmp_path / "slots-"))
    prefix = stdin_prefix(script, whole_input=True)
    eaten = subprocess.run(
        ["sh", "-c", BOOTSTRAP], input=prefix[prefix.index(b"\n") + 1 :], capture_output=True, timeout=15
    )
    assert (eaten.returncode, eaten.stdout, eaten.stderr.decode()) == (EXIT_INCOMPLETE, b"", f"{INCOMPLETE_MARK}\n")
    no_go = subprocess.run(["sh", "-c", BOOTSTRAP], input=prefix + b"initialize\n", capture_output=True, timeout=15)
    assert (no_go.returncode, no_go.stdout) == (EXIT_NO_GO, f"{MARKER}\n".encode())
    with pytest.raises(ValueError, match="ready marker"):
        attach_login_script(ready_marker="a b")
