"""The reattach window's host scripts, run for real under dash, bash and BusyBox ash: a stream
across link losses, a flood held at the bound, the window's end, refusals, the host check
(tests/support/relay_host.py has the controller and the shells)."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest

from remote_acp.errors import Cause
from remote_acp.targets.ssh.relay.attach import EXIT_ATTACHED_ELSEWHERE, EXIT_NO_SESSION, EXIT_WRONG_SECRET
from remote_acp.targets.ssh.relay.host_check import host_check_script, parse_host_check
from remote_acp.targets.ssh.relay.link import Link, refusal_error
from remote_acp.targets.ssh.relay.segments import SEGMENT_HELPERS
from tests.support.processes import wait_for
from tests.support.relay_host import (
    AGENT,
    BOUND,
    SEGMENT,
    SHELLS,
    Controller,
    Refused,
    session_processes,
    shell_env,
    slot_free,
    wait_gone,
)

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.process


@pytest.fixture(params=SHELLS)
def shell(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    return shell_env(request.param, tmp_path)


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


def test_segment_names_are_padded_as_printf_pads_them(shell: tuple[list[str], dict[str, str]]) -> None:
    sh, env = shell
    offsets = ["0", "7", "65536", "1048576", "123456789012345", "1234567890123456"]
    script = (
        SEGMENT_HELPERS
        + 'for n in "$@"; do _ra_name "/a b/o" "$n"\n'
        + '  printf "%s|%s\\n" "$_ra_v" "$(printf "%s.%015d" "/a b/o" "$n")"\ndone'
    )
    done = subprocess.run([*sh, "-c", script, "ra", *offsets], capture_output=True, text=True, env=env, timeout=10)
    lines = done.stdout.splitlines()
    assert len(lines) == len(offsets) and done.returncode == 0
    for line in lines:
        ours, printfs = line.split("|")
        assert ours == printfs
