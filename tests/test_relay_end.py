"""The end of a reattachable session, run for real under dash, bash and BusyBox ash: the
controller's ``X`` ends the agent's tree (TERM, KILL after the grace) and the rest of the output
still comes, a session ended with nobody attached goes at once, and the agent's own end reaches
the attached connection within a fifth of a second while an idle relay costs next to nothing."""

from __future__ import annotations

import os
import re
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from remote_acp.targets.ssh.relay.attach import AGENT_LINE
from remote_acp.targets.ssh.relay.segments import AGENT_ERR_KEPT
from tests.support.processes import wait_for
from tests.support.relay_host import AGENT, SHELLS, Controller, session_processes, shell_env, wait_gone

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.process


@pytest.fixture(params=SHELLS)
def shell(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    return shell_env(request.param, tmp_path)


@pytest.fixture
def base(tmp_path: Path) -> Path:
    path = tmp_path / f"slots-{os.getuid()}"  # where the login finds it
    path.mkdir(mode=0o700)
    return path


@pytest.fixture
def controllers() -> Iterator[list[Controller]]:
    made: list[Controller] = []
    yield made
    for c in made:
        c.close()


def started(made: list[Controller], shell: tuple[list[str], dict[str, str]], base: Path, *agent: str) -> Controller:
    c = Controller(*shell, base)
    made.append(c)
    c.start([sys.executable, "-c", AGENT, *agent], window_s=30)
    return c


@pytest.mark.parametrize(("mode", "rc"), [("idle", 143), ("stubborn", 137)])
def test_x_ends_the_agents_tree_and_the_output_still_drains_to_the_attached_connection(
    shell: tuple[list[str], dict[str, str]], base: Path, controllers: list[Controller], mode: str, rc: int
) -> None:
    if mode == "idle":  # a child, and a daemon that left the tree: all three go
        c = started(controllers, shell, base, "idle")
        wait_for(lambda: len(session_processes(c.sid)) >= 3, "the agent, its child and its daemon")
    else:  # ignores TERM: killed after the grace (1 s)
        c = started(controllers, shell, base, "echo", "-", "stubborn")
        wait_for(lambda: b"\n" in c.out, "the agent's first line")
    c.send(b"before the end\n")
    sent = time.monotonic()
    c.end_session()
    total = c.wait_end(within=10)
    took = time.monotonic() - sent
    assert c.end == f"RA-END out={total} rc={rc}".encode()
    assert took < (3.0 if mode == "stubborn" else 2.0), f"the end took {took:.2f} s"
    assert not session_processes(c.sid)
    if mode == "stubborn":
        assert bytes(c.out).endswith(b"got before the end\n"), "output written before the end was lost"
    assert c.directory.exists(), "removed before the attached controller had the output"
    assert c.finish(close_input=False) == rc
    wait_gone(c, within=5)


def test_x_with_nobody_attached_after_it_removes_the_session_at_once(
    shell: tuple[list[str], dict[str, str]], base: Path, controllers: list[Controller]
) -> None:
    c = started(controllers, shell, base, "echo", "-")
    wait_for(lambda: b"\n" in c.out, "the agent's first line")
    c.end_session()
    c.cut("close")  # no acknowledgement, and a window of 30 s
    wait_gone(c, within=5)


@pytest.mark.timing
def test_the_agents_end_reaches_the_attached_connection_within_a_fifth_of_a_second(
    shell: tuple[list[str], dict[str, str]], base: Path, controllers: list[Controller]
) -> None:
    latencies: list[float] = []
    for _ in range(3):
        stamp = base.parent / f"ended-{len(latencies)}"
        c = started(controllers, shell, base, "echo", str(stamp))
        wait_for(lambda: b"\n" in c.out, "the agent's first line")  # noqa: B023 (called at once)
        c.send(b"exit 4\n")
        c.wait_end()
        assert c.end_at is not None
        latencies.append(c.end_at - float(stamp.read_text()))
        assert c.finish(close_input=False) == 4
        wait_gone(c, within=5)
    assert statistics.median(latencies) < 0.2, f"agent's end to RA-END: {latencies}"


@pytest.mark.timing
def test_an_idle_relay_costs_next_to_no_cpu(
    shell: tuple[list[str], dict[str, str]], base: Path, controllers: list[Controller]
) -> None:
    c = started(controllers, shell, base, "echo", "-")
    pid_file = c.directory / "relay.pid"
    wait_for(lambda: pid_file.exists() and pid_file.read_text().endswith("\n"), "the relay's pid")
    relay = int((c.directory / "relay.pid").read_text().split()[0])
    c.cut("kill")

    def cpu_s() -> float:
        fields = Path(f"/proc/{relay}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime

    before, t0 = cpu_s(), time.monotonic()
    time.sleep(3)
    used = (cpu_s() - before) / (time.monotonic() - t0)
    assert used < 0.03, f"an idle relay used {used:.1%} of a core"
    c.login()
    c.end_session()
    c.finish()
    wait_gone(c, within=5)


def test_the_end_report_follows_the_agents_last_words_each_marked_as_its_own(
    shell: tuple[list[str], dict[str, str]], base: Path, controllers: list[Controller]
) -> None:
    # More stderr than the relay keeps, then a line that would pass for the relay's end report
    # were it not marked, then the agent's last words.
    script = (
        'i=0; while [ "$i" -lt 300 ]; do echo "line $i of the agent stderr, long enough to fill the bound" >&2; '
        "i=$((i + 1)); done; echo 'RA-END out=0 rc=0' >&2; echo 'last words: no API key' >&2; echo out; exit 5"
    )
    c = Controller(*shell, base)
    controllers.append(c)
    c.start(["sh", "-c", script], window_s=30)
    assert c.wait_end() == 4
    assert c.end == b"RA-END out=4 rc=5"
    lines = bytes(c.stderr).decode().splitlines()
    end = lines.index("RA-END out=4 rc=5")
    said = [line for line in lines[:end] if line.startswith(AGENT_LINE)]
    assert said[-2:] == [f"{AGENT_LINE}RA-END out=0 rc=0", f"{AGENT_LINE}last words: no API key"]
    # Only the last bytes, and no line the bound cut short
    kept = said[:-2]
    assert 40 < len(kept) < 300
    assert all(re.fullmatch(r"agent: line \d+ of the agent stderr, long enough to fill the bound", x) for x in kept)
    assert kept[-1] == f"{AGENT_LINE}line 299 of the agent stderr, long enough to fill the bound"
    assert sum(len(x) - len(AGENT_LINE) + 1 for x in said) <= AGENT_ERR_KEPT
    assert c.finish(close_input=False) == 5
    wait_gone(c, within=5)


@pytest.mark.parametrize("lines", [64, 65])
def test_the_agents_last_words_keep_every_whole_line_that_fits(
    shell: tuple[list[str], dict[str, str]], base: Path, controllers: list[Controller], lines: int
) -> None:
    # Lines of 64 bytes: 64 of them are exactly the bytes kept, and with one more the kept bytes
    # start right after a newline. Either way the last 64 lines come, each whole.
    assert AGENT_ERR_KEPT == 64 * 64
    script = (
        f'i=100; while [ "$i" -lt {100 + lines} ]; do printf "line %s %s\\n" "$i" "{"x" * 54}" >&2; '
        "i=$((i + 1)); done; exit 7"
    )
    c = Controller(*shell, base)
    controllers.append(c)
    c.start(["sh", "-c", script], window_s=30)
    c.wait_end()
    said = [x for x in bytes(c.stderr).decode().splitlines() if x.startswith(AGENT_LINE)]
    first = 100 + lines - 64
    assert said == [f"{AGENT_LINE}line {i} {'x' * 54}" for i in range(first, 100 + lines)]
    assert c.finish(close_input=False) == 7
    wait_gone(c, within=5)


def test_the_last_words_of_an_agent_whose_child_holds_its_stderr_come_once_the_relay_ends_the_child(
    shell: tuple[list[str], dict[str, str]], base: Path, controllers: list[Controller]
) -> None:
    # The child ignores TERM: the relay kills it after its grace (1 s here), and only then does
    # the agent's stderr end.
    script = "(trap '' TERM; exec sleep 30) >/dev/null & echo 'Error: boom' >&2; exit 3"
    c = Controller(*shell, base)
    controllers.append(c)
    c.start(["sh", "-c", script], window_s=30)
    c.wait_end(within=15)
    assert f"{AGENT_LINE}Error: boom" in bytes(c.stderr).decode().splitlines()
    assert c.end is not None and c.end.endswith(b"rc=3")
    assert c.finish(close_input=False) == 3
    wait_gone(c, within=5)


def test_a_stderr_holder_that_escaped_the_tree_costs_the_last_words_not_the_end(
    shell: tuple[list[str], dict[str, str]], base: Path, controllers: list[Controller], tmp_path: Path
) -> None:
    # A daemon in a session of its own, its environment scrubbed (no mark): the relay cannot find
    # it, and it holds the agent's stderr open long after the agent ended.
    pid_file = tmp_path / "escapee.pid"
    escape = f"setsid env -i sh -c 'echo $$ >{pid_file}; exec sleep 60' >/dev/null &"
    c = Controller(*shell, base)
    controllers.append(c)
    try:
        c.start(["sh", "-c", f"{escape} echo 'Error: boom' >&2; exit 3"], window_s=30)
        started = time.monotonic()
        c.wait_end(within=15)
        assert time.monotonic() - started < 8, "the end waited for the escaped holder"
        assert c.end is not None and c.end.endswith(b"rc=3")
        assert c.finish(close_input=False) == 3
    finally:
        wait_for(pid_file.exists, "the escapee's pid", within=5)
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
    wait_gone(c, within=5)  # (the escapee held the agent's slot, as any process of the agent's does)
