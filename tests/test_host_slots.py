"""A host's agent slots: taken by the session script with a real ``flock``, counted by the probe
from ``/proc/locks``, read back as errors and verdicts, and used to rank hosts.

The scripts run here under ``/bin/sh`` as the host would run them (the bootstrap line, the
script on stdin), with a slot directory of the test's own.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from hostinv import Host
from hostinv.probes import HostProbe, ProbeReport, Verdict, judge_report, parse_report, probe_script
from remote_acp.cli.placement import is_selection
from remote_acp.errors import ErrorKind
from remote_acp.fleet import handshake_judgement, rank_hosts
from remote_acp.targets.exit_status import ExitStatus
from remote_acp.targets.ssh.errors import ssh_exit_error
from remote_acp.targets.ssh.loader import BOOTSTRAP, stdin_prefix
from remote_acp.targets.ssh.script import (
    AT_CAPACITY_MARK,
    EXIT_AT_CAPACITY,
    EXIT_NO_SLOTS,
    SLOTS_MARK,
    remote_script,
)
from remote_acp.targets.ssh.settings import SshSettings

if TYPE_CHECKING:
    from collections.abc import Iterator

TIMEOUT_S = 30


class Holder:
    """A session script whose agent (``sleep``) runs until the test ends it."""

    def __init__(self, prefix: str, capacity: int, command: list[str] | None = None) -> None:
        script = remote_script(
            "/", command or ["sleep", "60"], capacity=capacity, slot_prefix=prefix, ready_marker="rdy"
        )
        self.proc = subprocess.Popen(
            ["/bin/sh", "-c", BOOTSTRAP],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(stdin_prefix(script))
        self.proc.stdin.flush()

    def go(self) -> bool:
        """Wait for the ready marker and send the go-ahead; ``False`` if the script exited first."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if self.proc.stdout.readline() != b"rdy\n":
            return False
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()
        return True

    def refused(self) -> tuple[int, str]:
        """The exit status and stderr of a script that ended before its marker."""
        _, err = self.proc.communicate(timeout=TIMEOUT_S)
        return self.proc.returncode, err.decode()

    def kill(self) -> None:
        """SIGKILL the whole session: the shell, the agent, the watchdog."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.communicate(timeout=TIMEOUT_S)


@pytest.fixture
def prefix(tmp_path: Path) -> str:
    return f"{tmp_path}/slots-"


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    started: list[Holder] = []
    yield started
    for holder in started:
        holder.kill()


def held(prefix: str) -> int | None:
    """What the probe counts, run by the local /bin/sh as sshd would run it."""
    script = probe_script("sh", "/", slot_prefix=prefix)
    done = subprocess.run(["/bin/sh", "-s"], input=script.encode(), capture_output=True, timeout=TIMEOUT_S, check=True)
    return parse_report(done.stdout.decode()).slots_held


def test_a_full_host_refuses_the_next_session_before_it_starts(
    prefix: str, holders: list[Holder], tmp_path: Path
) -> None:
    for _ in range(2):
        holders.append(Holder(prefix, capacity=2))
        assert holders[-1].go()
    ran = tmp_path / "ran"
    third = Holder(prefix, capacity=2, command=["touch", str(ran)])
    holders.append(third)
    code, err = third.refused()
    assert (code, err) == (EXIT_AT_CAPACITY, f"{AT_CAPACITY_MARK} 2\n")
    assert not ran.exists()  # refused before the marker: nothing started
    assert held(prefix) == 2
    uid = os.getuid()
    assert oct(Path(f"{prefix}{uid}").stat().st_mode & 0o777) == "0o700"


def test_a_slot_is_free_the_moment_its_session_ended(prefix: str) -> None:
    """One slot, sessions one after another as a scheduler starts them: each finds the slot the
    last one held free. The watchdog outlives the script by a moment; it must not hold the slot."""
    script = stdin_prefix(remote_script("/", ["true"], capacity=1, slot_prefix=prefix, ready_marker="rdy"))
    statuses = [
        subprocess.run(["/bin/sh", "-c", BOOTSTRAP], input=script + b"go\n", capture_output=True, timeout=TIMEOUT_S)
        for _ in range(20)
    ]
    assert [(done.returncode, done.stderr) for done in statuses] == [(0, b"")] * 20


def test_slots_are_counted_among_many_other_locks(prefix: str, holders: list[Holder], tmp_path: Path) -> None:
    """Hundreds of other processes' locks in /proc/locks (a database's): the count stays right,
    with the held slot and without it."""
    with (tmp_path / "other-locks").open("wb") as other:
        other.truncate(1000)
        for offset in range(0, 600, 2):  # apart, so that each is a lock of its own
            fcntl.lockf(other, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
        Path(f"{prefix}{os.getuid()}").mkdir(mode=0o700)
        assert held(prefix) == 0
        holders.append(Holder(prefix, capacity=2))
        assert holders[-1].go()
        assert held(prefix) == 1


def test_a_slot_frees_when_its_session_is_killed_whatever_held_it(prefix: str, holders: list[Holder]) -> None:
    first = Holder(prefix, capacity=1)
    holders.append(first)
    assert first.go()
    assert held(prefix) == 1
    first.kill()  # SIGKILL: no cleanup runs; the kernel drops the lock with the last descriptor
    assert held(prefix) == 0
    again = Holder(prefix, capacity=1)
    holders.append(again)
    assert again.go()
    assert held(prefix) == 1


def test_a_larger_capacity_takes_the_slots_a_smaller_one_leaves(prefix: str, holders: list[Holder]) -> None:
    small = Holder(prefix, capacity=1)
    holders.append(small)
    assert small.go()
    assert Holder(prefix, capacity=1).refused()[0] == EXIT_AT_CAPACITY
    large = Holder(prefix, capacity=3)
    holders.append(large)
    assert large.go()  # slot 2
    assert held(prefix) == 2


def test_a_slot_directory_that_is_a_link_is_refused(prefix: str, holders: list[Holder], tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    Path(f"{prefix}{os.getuid()}").symlink_to(elsewhere)
    holder = Holder(prefix, capacity=1)
    holders.append(holder)
    code, err = holder.refused()
    assert code == EXIT_NO_SLOTS
    assert err == f"{SLOTS_MARK} {prefix}{os.getuid()}\n"
    assert not list(elsewhere.iterdir())


@pytest.mark.skipif(os.geteuid() != 0, reason="giving the directory to another user needs root")
def test_a_slot_directory_of_another_user_is_refused(prefix: str, holders: list[Holder]) -> None:
    slots = Path(f"{prefix}{os.getuid()}")
    slots.mkdir(mode=0o700)
    os.chown(slots, 65534, 65534)  # nobody's: it could hold or plant our slots
    holder = Holder(prefix, capacity=1)
    holders.append(holder)
    code, err = holder.refused()
    assert code == EXIT_NO_SLOTS
    assert err == f"{SLOTS_MARK} {slots}\n"
    assert not list(slots.iterdir())


def probed(prefix: str) -> ProbeReport:
    script = probe_script("sh", "/", slot_prefix=prefix)
    done = subprocess.run(["/bin/sh", "-s"], input=script.encode(), capture_output=True, timeout=TIMEOUT_S, check=True)
    return parse_report(done.stdout.decode())


def test_a_slot_directory_no_session_can_use_makes_the_host_at_capacity(prefix: str, tmp_path: Path) -> None:
    """A link (or another user's directory) where the slots go: every start there would be
    refused, so the probe says so before a placement picks the host."""
    slots = Path(f"{prefix}{os.getuid()}")
    slots.symlink_to(tmp_path)
    report = probed(prefix)
    assert report.slots_unusable and report.slot_dir == str(slots) and report.slots_held is None
    ready = replace(report, workspace="dir", workspace_writable=True, agent_found=True, agent_path="/bin/q")
    judged = judge_report(ready, "q", "/w", capacity=4)
    assert judged.verdict is Verdict.AT_CAPACITY and str(slots) in judged.message
    assert judged.fix == f"remove {slots} on the host (its owner or root can), then retry"
    slots.unlink()
    slots.mkdir(mode=0o700)
    os.chown(slots, 65534, 65534)  # nobody's
    assert probed(prefix).slots_unusable
    slots.rmdir()
    slots.mkdir(mode=0o700)
    assert not probed(prefix).slots_unusable and probed(prefix).slots_held == 0


def test_the_probe_counts_nothing_where_no_session_ever_ran(prefix: str) -> None:
    assert held(prefix) == 0
    assert not Path(f"{prefix}{os.getuid()}").exists()  # a probe creates nothing
    script = probe_script("sh", "/")  # not asked: no key at all
    done = subprocess.run(["/bin/sh", "-s"], input=script.encode(), capture_output=True, timeout=TIMEOUT_S, check=True)
    assert parse_report(done.stdout.decode()).slots_held is None


def test_capacity_must_be_a_count() -> None:
    with pytest.raises(ValueError, match="capacity must be at least 1"):
        SshSettings(capacity=0)
    with pytest.raises(ValueError, match="capacity must be an integer"):
        remote_script("/", ["a"], capacity=True)
    with pytest.raises(ValueError, match="slot prefix"):
        remote_script("/", ["a"], capacity=1, slot_prefix="/tmp/x'; rm -rf ~; '")


# -- the exit read back, the verdicts, the ranking --------------------------------------------


def test_an_at_capacity_exit_is_a_retryable_port_exit_naming_the_host() -> None:
    error = ssh_exit_error(
        "ci@build-1",
        ExitStatus(EXIT_AT_CAPACITY),
        agent_wrote=False,
        stderr=f"Authenticated to build-1 | {AT_CAPACITY_MARK} 4",
        ready=False,
    )
    assert error is not None
    assert (error.kind, error.retryable) == (ErrorKind.PORT_EXIT, True)
    assert error.message == (
        "ci@build-1 is at capacity: all 4 of its agent slots are held by running sessions; nothing was started"
    )
    judged = handshake_judgement(error)
    assert judged.verdict is Verdict.AT_CAPACITY and judged.fix and "capacity" in judged.fix


def test_an_unusable_slot_directory_is_permanent_and_names_it() -> None:
    error = ssh_exit_error(
        "build-1",
        ExitStatus(EXIT_NO_SLOTS),
        agent_wrote=False,
        stderr=f"Authenticated to build-1 | {SLOTS_MARK} /tmp/remote-acp-slots-1000",
        ready=False,
    )
    assert error is not None and (error.kind, error.retryable) == (ErrorKind.PORT_EXIT, False)
    assert "/tmp/remote-acp-slots-1000 on build-1 is not usable" in error.message


def test_a_probe_that_counts_every_slot_held_is_at_capacity() -> None:
    report = ProbeReport(workspace="dir", workspace_writable=True, agent_found=True, agent_path="/bin/q", slots_held=2)
    judged = judge_report(report, "q", "/w", capacity=2)
    assert judged.verdict is Verdict.AT_CAPACITY
    assert judged.message == "2 agents already run there, its capacity is 2"
    assert judge_report(report, "q", "/w", capacity=3).verdict is Verdict.READY
    assert judge_report(report, "q", "/w").verdict is Verdict.READY  # capacity not asked
    missing = ProbeReport(workspace="missing", agent_found=True, slots_held=5)
    assert judge_report(missing, "q", "/w", capacity=1).verdict is Verdict.WORKSPACE_INVALID  # a real problem first


def probe(name: str, *, load: float | None, cores: int = 4, held: int | None = 0, capacity: int = 2) -> HostProbe:
    report = ProbeReport(cores=cores, load=None if load is None else (load, 0.0, 0.0), slots_held=held)
    return HostProbe(Host(name=name, capacity=capacity), Verdict.READY, "ready", None, report, 0.1)


def test_hosts_rank_free_first_then_least_loaded_per_core_then_most_free() -> None:
    probes = [
        probe("full", load=0.0, held=2),
        probe("busy", load=3.0),
        probe("idle-small", load=0.4, cores=4, capacity=1),
        probe("idle-big", load=0.4, cores=4, capacity=4),
        probe("big-machine", load=4.0, cores=64),
        probe("unknown-load", load=None),
        HostProbe(Host(name="down"), Verdict.UNREACHABLE, "refused", None, None, 0.1),
    ]
    names = [h.name for h in rank_hosts(probes)]
    assert names == ["big-machine", "idle-big", "idle-small", "busy", "unknown-load", "full"]


def test_sessions_opened_since_the_probe_count_against_a_host() -> None:
    probes = [probe("a", load=0.1, capacity=1), probe("b", load=0.9, capacity=1)]
    assert [h.name for h in rank_hosts(probes)] == ["a", "b"]
    assert [h.name for h in rank_hosts(probes, {"a": 1})] == ["b", "a"]
    closed = [probe("a", load=0.1, held=1, capacity=1), probe("b", load=0.9, capacity=1)]
    assert [h.name for h in rank_hosts(closed, {"a": -1})] == ["a", "b"]


@pytest.mark.parametrize(
    ("text", "selection"),
    [("@build", True), ("build-*", True), ("b[12]", True), ("build-1", False), ("ci@10.0.0.5:2222", False)],
)
def test_host_selections_are_told_from_destinations(text: str, selection: bool) -> None:
    assert is_selection(text) is selection


def test_the_slot_tools_are_checked_before_anything_runs(tmp_path: Path) -> None:
    """A host without flock fails the start naming it, as for the supervisor's other tools."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("awk", "grep", "sed", "cat", "sleep", "id", "ls"):
        (bin_dir / tool).symlink_to(f"/usr/bin/{tool}" if Path(f"/usr/bin/{tool}").exists() else f"/bin/{tool}")
    script = remote_script("/", ["true"], capacity=1, slot_prefix=f"{tmp_path}/s-", tool_path=str(bin_dir))
    done = subprocess.run(
        ["env", f"PATH={bin_dir}", "/bin/sh", "-c", BOOTSTRAP],
        input=stdin_prefix(script),
        capture_output=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 96, done.stderr
    assert done.stderr.decode().endswith("needs: flock\n")
    assert sys.platform != "linux" or not Path(f"{tmp_path}/s-{os.getuid()}").exists()


@pytest.mark.anyio
async def test_a_pool_refuses_an_agent_command_that_does_not_read_as_words() -> None:
    from remote_acp import RemoteAcpError, SessionOptions
    from remote_acp.fleet import HostPool

    pool = HostPool([Host(name="build-1")])
    with pytest.raises(RemoteAcpError) as info:
        async with pool.session("/w", SessionOptions(command="qwen 'x")):
            pass
    assert info.value.kind is ErrorKind.AGENT_NOT_FOUND
    assert info.value.message == "the agent command does not read as words: No closing quotation"
