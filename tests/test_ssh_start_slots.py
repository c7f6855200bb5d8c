"""The per-host limit on concurrent starts: who gets a slot, who waits, and what is shared.

Every test orders its steps by what the limiter has observably done (``wait_all_tasks_blocked``:
every task is parked on the limiter or on the test's own events), never by sleeping.
"""

from __future__ import annotations

import threading

import anyio
import anyio.to_thread
import pytest
from anyio import wait_all_tasks_blocked

from remote_acp.targets.launch import LocalTarget
from remote_acp.targets.ssh.settings import SshSettings
from remote_acp.targets.ssh.start_slots import in_flight, start_slot
from remote_acp.targets.ssh.target import SshTarget, start_key


class Starts:
    """Tasks that take a slot, note it, and hold it until the test lets them go."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.entered: list[int] = []
        self.most = 0
        self.release: dict[int, anyio.Event] = {}

    async def start(self, n: int, limit: int) -> None:
        self.release[n] = anyio.Event()
        async with start_slot(self.key, limit):
            self.entered.append(n)
            self.most = max(self.most, in_flight(self.key))
            await self.release[n].wait()


@pytest.mark.anyio
@pytest.mark.both_backends
async def test_at_most_the_limit_start_at_once_and_the_rest_in_order() -> None:
    starts = Starts("build port default config ")
    async with anyio.create_task_group() as tg:
        for n in range(6):
            tg.start_soon(starts.start, n, 2)
            await wait_all_tasks_blocked()  # each in turn reaches the limiter: a known order
        assert starts.entered == [0, 1]
        for n in range(6):
            starts.release[n].set()
            await wait_all_tasks_blocked()
            assert starts.entered == list(range(min(n + 3, 6)))
            assert in_flight(starts.key) == min(2, 5 - n)
    assert starts.most == 2
    assert in_flight(starts.key) == 0


@pytest.mark.anyio
@pytest.mark.both_backends
async def test_a_cancelled_waiter_takes_no_slot_and_holds_nobody_back() -> None:
    starts = Starts("k")
    async with anyio.create_task_group() as tg:
        tg.start_soon(starts.start, 0, 1)
        await wait_all_tasks_blocked()
        with anyio.CancelScope() as waiter:
            async with anyio.create_task_group() as inner:
                inner.start_soon(starts.start, 1, 1)  # waits behind 0
                await wait_all_tasks_blocked()
                tg.start_soon(starts.start, 2, 1)  # waits behind 1
                await wait_all_tasks_blocked()
                waiter.cancel()
        assert starts.entered == [0]
        starts.release[0].set()
        await wait_all_tasks_blocked()
        assert starts.entered == [0, 2]  # the cancelled one never entered
        starts.release[2].set()
    assert in_flight("k") == 0


@pytest.mark.anyio
@pytest.mark.both_backends
async def test_a_start_cancelled_inside_its_slot_gives_it_back() -> None:
    starts = Starts("k")
    async with anyio.create_task_group() as tg:
        with anyio.CancelScope() as first:
            async with anyio.create_task_group() as inner:
                inner.start_soon(starts.start, 0, 1)
                await wait_all_tasks_blocked()
                tg.start_soon(starts.start, 1, 1)
                await wait_all_tasks_blocked()
                first.cancel()
        await wait_all_tasks_blocked()
        assert starts.entered == [0, 1]
        starts.release[1].set()
    assert in_flight("k") == 0


@pytest.mark.anyio
@pytest.mark.both_backends
async def test_each_start_waits_by_its_own_limit_first_come_first_served() -> None:
    starts = Starts("k")
    async with anyio.create_task_group() as tg:
        tg.start_soon(starts.start, 0, 8)
        await wait_all_tasks_blocked()
        tg.start_soon(starts.start, 1, 1)  # limit 1: waits while anything is starting
        await wait_all_tasks_blocked()
        tg.start_soon(starts.start, 2, 8)  # room under its own limit, but it came later
        await wait_all_tasks_blocked()
        assert starts.entered == [0]  # 2 does not overtake 1
        starts.release[0].set()
        await wait_all_tasks_blocked()
        assert sorted(starts.entered) == [0, 1, 2]  # then 2 starts beside 1: its own limit allows it
        starts.release[1].set()
        starts.release[2].set()


@pytest.mark.anyio
@pytest.mark.both_backends
async def test_keys_are_counted_apart() -> None:
    a, b = Starts("a"), Starts("b")
    async with anyio.create_task_group() as tg:
        tg.start_soon(a.start, 0, 1)
        tg.start_soon(b.start, 0, 1)
        await wait_all_tasks_blocked()
        assert (a.entered, b.entered) == ([0], [0])
        a.release[0].set()
        b.release[0].set()


@pytest.mark.anyio
@pytest.mark.both_backends
async def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        async with start_slot("k", 0):
            pass


@pytest.mark.anyio
@pytest.mark.both_backends
async def test_ssh_targets_to_one_sshd_share_its_slots() -> None:
    settings = SshSettings(max_concurrent_starts=1)
    first, other_user = SshTarget("alice@build:2222", settings), SshTarget("bob@build:2222", settings)
    entered: list[str] = []
    go = anyio.Event()

    async def start(target: SshTarget, name: str) -> None:
        async with target.start_slot():
            entered.append(name)
            await go.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(start, first, "alice")
        await wait_all_tasks_blocked()
        tg.start_soon(start, other_user, "bob")  # the same sshd: waits
        tg.start_soon(start, SshTarget("build:2200", settings), "other port")
        tg.start_soon(start, SshTarget("build:2222", SshSettings(config_file="/x/cfg")), "other config")
        await wait_all_tasks_blocked()
        assert sorted(entered) == ["alice", "other config", "other port"]
        go.set()
    assert entered[-1] == "bob"


@pytest.mark.anyio
@pytest.mark.both_backends
async def test_the_local_target_never_waits() -> None:
    # Three starts at once, each holding its slot: a limited slot would keep the third waiting.
    target = LocalTarget()
    entered = 0
    with anyio.move_on_after(1) as bound:
        async with target.start_slot(), target.start_slot(), target.start_slot():
            entered = 3
    assert not bound.cancelled_caught and entered == 3, "a local start waited for a slot"


def test_start_key_names_the_sshd_not_the_user() -> None:
    assert start_key("alice@build:2222", SshSettings()) == start_key("build:2222", SshSettings())
    assert start_key("build", SshSettings()) != start_key("build:22", SshSettings())
    assert start_key("[::1]:22", SshSettings()) == start_key("u@[::1]:22", SshSettings())
    assert start_key("build", SshSettings(config_file="none")) != start_key("build", SshSettings())


def test_each_event_loop_has_its_own_slots() -> None:
    # anyio's primitives belong to the loop that made them: a slot held on one loop (in another
    # thread) neither blocks nor breaks the same host's slots on another loop, of either backend.
    held, done = threading.Event(), threading.Event()

    async def hold() -> None:
        async with start_slot("shared", 1):
            held.set()
            await anyio.to_thread.run_sync(done.wait)

    async def peek() -> int:
        with anyio.fail_after(30):  # would wait forever if the other loop's slot counted here
            async with start_slot("shared", 1):
                return in_flight("shared")

    holder = threading.Thread(target=anyio.run, args=(hold,))
    holder.start()
    try:
        assert held.wait(30)
        assert [anyio.run(peek, backend=backend) for backend in ("asyncio", "trio")] == [1, 1]
    finally:
        done.set()
        holder.join()
