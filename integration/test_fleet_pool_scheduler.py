"""``HostPool`` as a scheduler embeds it, against four real sshd hosts, on asyncio and trio.

Placements made at once spread over the free slots; probes of one host are shared; a placement
on a warm pool logs in once (counted in the hosts' sshd logs, where every login is an
``Accepted publickey`` line); a host missing the workspace, or gone, is passed over; a placement
may wait for a slot; and a queue of jobs over the pool, one host killed mid-run, ends every job
with the dead host tried at most once after it died.

Each test has throwaway users of its own, one per host (their logins are theirs in the logs).
The agent is the scripted agent under the system's python3, behind a small script that answers
the probe's ``--version``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from hostinv import Host
from integration.sshlab import SshLab
from integration.users import User, agent_pythonpath, throwaway_user
from remote_acp.errors import Cause, ErrorKind, RemoteAcpError
from remote_acp.fleet.pool import HostPool, SlotWait
from remote_acp.options import SessionOptions
from remote_acp.targets.process import tree as process_tree
from remote_acp.targets.ssh.settings import SshSettings
from tests.support.agent_scripts import SYSTEM_PYTHON, host_agent_script

if TYPE_CHECKING:
    from collections.abc import Iterator

    from remote_acp.fleet.pool import Placement

pytestmark = [pytest.mark.anyio, pytest.mark.both_backends]

# A user with ~/blackhole gets an agent that takes the login and never answers initialize.
AGENT = ('[ -e "$HOME/blackhole" ] && agent --answer-after initialize=600', "agent")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshLab]:
    """Four loopback hosts for this module (tests that kill a host start a lab of their own)."""
    started = SshLab(tmp_path_factory.mktemp("poollab")).start(4, namespaced=False)
    try:
        yield started
    finally:
        started.stop()


@dataclass
class Fleet:
    """The lab's hosts, each logged in to as a user of its own: the lab's hosts are one machine,
    and a user's agent slots are the machine's, so one user per host gives each host its own.
    The agent and the workspace are at the same paths on every host (shared, like NFS)."""

    lab: SshLab
    users: list[User]
    agent: str
    workspace: str

    def pool(self, *, capacity: int = 1, count: int = 4, slot_poll_s: float = 2.0) -> HostPool:
        hosts = [
            Host(name=h.alias, address=h.alias, user=u.name, capacity=capacity)
            for h, u in zip(self.lab.hosts[:count], self.users, strict=False)
        ]
        settings = SshSettings(config_file=str(self.lab.config), connect_timeout_s=5)
        return HostPool(hosts, settings=settings, probe_max_age_s=120, slot_poll_s=slot_poll_s)

    def options(self) -> SessionOptions:
        return SessionOptions(command=self.agent)

    def logins(self) -> dict[str, int]:
        """Each host's logins so far (of its user), from its sshd log."""
        return {
            h.alias: (h.root / "sshd.log").read_text(errors="replace").count(f"Accepted publickey for {u.name} ")
            for h, u in zip(self.lab.hosts, self.users, strict=False)
        }


@contextlib.contextmanager
def make_fleet(lab: SshLab, homes: Path) -> Iterator[Fleet]:
    assert SYSTEM_PYTHON is not None
    shared = Path(tempfile.mkdtemp(prefix="fleet-", dir=homes))
    shared.chmod(0o755)
    agent = shared / "agent"
    agent.write_text(host_agent_script(*AGENT, python=SYSTEM_PYTHON, pythonpath=agent_pythonpath()))
    agent.chmod(0o755)
    workspace = shared / "ws"
    workspace.mkdir()
    workspace.chmod(0o777)
    with contextlib.ExitStack() as stack:
        users = [stack.enter_context(throwaway_user(lab.client_key.with_suffix(".pub"), base=homes)) for _ in lab.hosts]
        yield Fleet(lab, users, str(agent), str(workspace))
    shutil.rmtree(shared, ignore_errors=True)


@pytest.fixture
def fleet(lab: SshLab, homes: Path) -> Iterator[Fleet]:
    with make_fleet(lab, homes) as made:
        yield made


async def test_concurrent_ranks_share_one_probe_per_host(fleet: Fleet) -> None:
    pool = fleet.pool()
    rankings: list[list[str]] = []

    async def rank() -> None:
        rankings.append([h.name for h in await pool.rank(fleet.agent, fleet.workspace)])

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(rank)
    assert len(rankings) == 8 and all(sorted(r) == ["lab1", "lab2", "lab3", "lab4"] for r in rankings)
    assert fleet.logins() == {"lab1": 1, "lab2": 1, "lab3": 1, "lab4": 1}


async def test_placements_at_once_take_every_free_slot_with_one_login_each(fleet: Fleet) -> None:
    pool = fleet.pool()
    workspace = fleet.workspace
    await pool.rank(fleet.agent, workspace)  # a warm pool
    warm = fleet.logins()
    placed: list[Placement] = []
    all_placed, release = anyio.Event(), anyio.Event()

    async def place() -> None:
        async with pool.session(workspace, fleet.options()) as placement:
            placed.append(placement)
            if len(placed) == 4:
                all_placed.set()
            turn = await placement.session.run_turn("hello")
            assert turn.ok, turn.message
            await release.wait()

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(place)
            await all_placed.wait()
            assert sorted(p.host.name for p in placed) == ["lab1", "lab2", "lab3", "lab4"]
            assert all(p.failed == () for p in placed)
            assert pool.opened == {"lab1": 1, "lab2": 1, "lab3": 1, "lab4": 1}
            assert {h: n - warm[h] for h, n in fleet.logins().items()} == dict.fromkeys(warm, 1)

            # Every slot held: a fifth placement fails at once, with no login.
            with pytest.raises(RemoteAcpError) as info:
                async with pool.session(workspace, fleet.options()):
                    pass
            error = info.value
            assert (error.kind, error.cause, error.retryable) == (ErrorKind.PORT_EXIT, Cause.AT_CAPACITY, True)
            assert [a.cause for a in error.facts.attempts] == [Cause.AT_CAPACITY] * 4
            assert {h: n - warm[h] for h, n in fleet.logins().items()} == dict.fromkeys(warm, 1)
            release.set()
    assert pool.opened == {}
    assert pool.tries == dict.fromkeys(warm, 1)


async def test_a_placement_waits_for_a_slot_and_takes_it_when_one_frees(fleet: Fleet) -> None:
    pool = fleet.pool(count=1)
    workspace = fleet.workspace
    waits: list[SlotWait] = []
    holding, release, waiting, placed_second = anyio.Event(), anyio.Event(), anyio.Event(), anyio.Event()
    hosts: list[str] = []

    def on_wait(wait: SlotWait) -> None:
        waits.append(wait)
        waiting.set()

    async def first() -> None:
        async with pool.session(workspace, fleet.options()) as placement:
            hosts.append(placement.host.name)
            holding.set()
            await release.wait()

    async def second() -> None:
        async with pool.session(workspace, fleet.options(), wait_for_slot_s=30, on_wait=on_wait) as placement:
            hosts.append(placement.host.name)
            placed_second.set()
            turn = await placement.session.run_turn("after the wait")
            assert turn.ok, turn.message

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            await holding.wait()
            with pytest.raises(RemoteAcpError) as info:  # not waiting: refused at once
                async with pool.session(workspace, fleet.options()):
                    pass
            assert info.value.cause is Cause.AT_CAPACITY
            tg.start_soon(second)
            await waiting.wait()
            assert not placed_second.is_set()
            assert waits[0].full == ("lab1",) and 0 < waits[0].left_s <= 30
            release.set()
            await placed_second.wait()
    assert hosts == ["lab1", "lab1"]
    assert pool.opened == {}


async def test_a_wait_for_a_slot_is_bounded(fleet: Fleet) -> None:
    pool = fleet.pool(count=1, slot_poll_s=0.2)
    workspace = fleet.workspace
    waits: list[SlotWait] = []
    with anyio.fail_after(60):
        async with pool.session(workspace, fleet.options()):
            with pytest.raises(RemoteAcpError) as info:
                async with pool.session(workspace, fleet.options(), wait_for_slot_s=1.0, on_wait=waits.append):
                    pass
    assert info.value.cause is Cause.AT_CAPACITY and info.value.retryable
    assert len(waits) >= 2 and waits[-1].left_s < waits[0].left_s  # polled the host again while waiting


async def test_a_workspace_missing_everywhere_is_invalid_workspace_cwd_after_one_line_per_failover(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    pool = fleet.pool()
    workspace = fleet.workspace
    await pool.rank(fleet.agent, workspace)  # warm: the workspace was there
    os.rmdir(workspace)
    caplog.set_level(logging.INFO, logger="remote_acp.fleet.pool")
    with anyio.fail_after(60), pytest.raises(RemoteAcpError) as info:
        async with pool.session(workspace, fleet.options()):
            pass
    error = info.value
    assert (error.kind, error.cause, error.retryable) == (
        ErrorKind.INVALID_WORKSPACE_CWD,
        Cause.WORKSPACE_INVALID,
        False,
    )
    assert sorted(a.host for a in error.facts.attempts) == ["lab1", "lab2", "lab3", "lab4"]
    assert f"mkdir -p -- {workspace}" in error.fix
    assert pool.tries == {"lab1": 1, "lab2": 1, "lab3": 1, "lab4": 1}  # every host tried, once
    records = [r for r in caplog.records if r.name == "remote_acp.fleet.pool"]
    assert [r.levelno for r in records] == [logging.INFO] * 4
    assert all("\n" not in r.getMessage() and "workspace_invalid" in r.getMessage() for r in records)

    # The pool now knows: the next placement fails with no login.
    before = fleet.logins()
    with pytest.raises(RemoteAcpError) as again:
        async with pool.session(workspace, fleet.options()):
            pass
    assert again.value.kind is ErrorKind.INVALID_WORKSPACE_CWD and fleet.logins() == before


def kill_host(lab: SshLab, alias: str) -> None:
    """The host dies: its sshd and every connection it serves, at once."""
    host = lab.host(alias)
    assert host.process is not None
    serving = process_tree.descendants(host.process.pid)
    host.process.kill()
    for ref in serving:
        with contextlib.suppress(ProcessLookupError):
            os.kill(ref.pid, signal.SIGKILL)
    host.process.wait()


async def test_a_job_queue_over_the_pool_survives_a_host_killed_mid_run(tmp_path: Path, homes: Path) -> None:
    (tmp_path / "lab").mkdir()
    own = SshLab(tmp_path / "lab").start(4, namespaced=False)
    try:
        with make_fleet(own, homes) as own_fleet:
            await run_queue(own_fleet, jobs=40, workers=8)
    finally:
        own.stop()


async def run_queue(fleet: Fleet, *, jobs: int, workers: int) -> None:
    pool = fleet.pool(capacity=2)
    workspace = fleet.workspace
    queue_send, queue_receive = anyio.create_memory_object_stream[int](jobs)
    for job in range(jobs):
        queue_send.send_nowait(job)
    queue_send.close()
    done: dict[int, str] = {}
    given_up: dict[int, RemoteAcpError] = {}
    dead = "lab2"
    tries_at_death: list[int] = []
    tries_at_forget: list[int] = []  # the dead host's tries when a failed session made the pool forget it
    retried: list[tuple[int, str, Cause | None]] = []

    async def run(job: int) -> None:
        for _ in range(4):
            try:
                async with pool.session(workspace, fleet.options(), wait_for_slot_s=20) as placed:
                    turn = await placed.session.run_turn(f"@sleep=0.2 job {job}")
                    if turn.ok:
                        done[job] = placed.host.name
                        if len(done) == jobs // 4 and not tries_at_death:
                            tries_at_death.append(pool.tries.get(dead, 0))
                            kill_host(fleet.lab, dead)
                        return
                    assert turn.error is not None and turn.error.retryable, turn.message
                    retried.append((job, placed.host.name, turn.cause))
                    pool.invalidate(placed.host.name)  # the link went: a probe before it is tried again
                    if placed.host.name == dead:
                        tries_at_forget.append(pool.tries.get(dead, 0))
            except RemoteAcpError as exc:
                if not exc.retryable:
                    given_up[job] = exc
                    return
        raise AssertionError(f"job {job} never ran")

    async def worker() -> None:
        async for job in queue_receive:
            await run(job)

    with anyio.fail_after(120), queue_receive:
        async with anyio.create_task_group() as tg:
            for _ in range(workers):
                tg.start_soon(worker)
    assert not given_up, given_up
    assert sorted(done) == list(range(jobs))
    assert tries_at_death, "the host was never killed"
    # The first start after the death marks the host down; a placement that reserved it in the
    # same instant, before that failure came back, may try it too (capacity 2); none after. Each
    # session that was on the host when it died ends with the scheduler's invalidate, which forgets
    # the down mark on purpose, so the count restarts at the last of them.
    since = tries_at_forget[-1] if tries_at_forget else tries_at_death[0]
    assert pool.tries.get(dead, 0) - since <= 2, (pool.tries, tries_at_death, tries_at_forget)
    assert dead in set(done.values())  # it ran jobs before it died
    assert all(host == dead for _, host, _ in retried), retried  # only the dead host's sessions failed
    assert pool.opened == {}


async def test_a_host_whose_agent_never_answers_draws_one_placement_not_every_one(fleet: Fleet) -> None:
    # lab1 looks as good as the others (and comes first), takes every login, and then its agent
    # never answers: after the first placement fails over from it, the next ones do not try it.
    fleet.users[0].write("blackhole", "")
    pool = fleet.pool(count=2, capacity=4)
    options = SessionOptions(command=fleet.agent, read_timeout_ms=1000, initialize_floor_ms=2000)
    tried: list[list[tuple[str, str]]] = []
    for _ in range(3):
        with anyio.fail_after(60):
            async with pool.session(fleet.workspace, options) as placed:
                assert placed.host.name == "lab2"
                tried.append([(a.host.name, a.error.cause.value) for a in placed.failed])
    assert tried == [[("lab1", "no_answer")], [], []]
