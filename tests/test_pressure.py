"""The session core's promises under pressure, against real agent processes that attack it.

Fair: a flooding agent does not starve the other tasks of the process. Bounded: a slow caller
pushes back on the agent instead of growing a buffer, and the turn's bounds fire anyway; an agent
that stops reading its stdin is a typed failure within ``read_timeout_ms``. Deep JSON is refused
where lines are parsed. A turn ends promptly whoever closes the session, and teardown always ends.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from remote_acp import (
    ErrorKind,
    Event,
    Malformed,
    Notification,
    RemoteAcpError,
    TurnCancelled,
    TurnResult,
    TurnTimedOut,
    open_session,
    start_session,
)
from remote_acp.session.connection import WRITE_HIGH_WATER
from remote_acp.session.turn import MAX_BUFFERED_BYTES, MAX_BUFFERED_EVENTS
from remote_acp.targets.process.agent import AgentProcess
from tests.support.agents import fast_options, scripted, wait_until
from tests.support.orphans import alive

if TYPE_CHECKING:
    from collections.abc import Iterator

    from remote_acp import Session

pytestmark = pytest.mark.anyio

HOSTILE = [sys.executable, str(Path(__file__).parent / "agents" / "hostile_agent.py")]


@pytest.fixture
def no_gc_pauses() -> Iterator[None]:
    """The cyclic collector off while fairness is measured: a full collection over the heap of a
    whole test run can hold this thread for a few hundred milliseconds, which says nothing of
    the client's own fairness (the command itself keeps start-up out of the collector's reach)."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class Ticker:
    """A task that sleeps 5 ms in a loop and records the worst gap between its wake-ups.

    ``worst`` is wall-clock time, which a loaded machine stretches whatever the client does;
    ``worst_busy`` is the event loop thread's own CPU time across the gap, which only grows while
    something in this process keeps the loop from the ticker (a starving reader, a blocking
    call). That one is what a fair client bounds, however busy the machine is.
    """

    def __init__(self) -> None:
        self.ticks = 0
        self.worst = 0.0
        self.worst_busy = 0.0

    async def run(self) -> None:
        last, last_cpu = time.monotonic(), time.thread_time()
        while True:
            await anyio.sleep(0.005)
            now, cpu = time.monotonic(), time.thread_time()
            self.worst = max(self.worst, now - last)
            self.worst_busy = max(self.worst_busy, cpu - last_cpu)
            self.ticks += 1
            last, last_cpu = now, cpu


@pytest.mark.both_backends
@pytest.mark.usefixtures("no_gc_pauses")
async def test_a_flooding_agent_does_not_starve_the_event_loop(workspace: str) -> None:
    ticker = Ticker()
    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker.run)
        async with open_session(workspace, fast_options(HOSTILE, turn_timeout_ms=2_000)) as s:
            result = await s.run_turn("flood")
        tg.cancel_scope.cancel()
    assert result.error is not None and result.error.kind is ErrorKind.TURN_TIMEOUT
    # 2 s of flooding: a fair reader lets the ticker run hundreds of times (a starving one let it
    # run twice in 4 s), and the loop never works for long without giving the ticker its turn.
    assert ticker.ticks > 20, ticker.ticks
    assert ticker.worst_busy < 0.2, (ticker.worst_busy, ticker.worst)


@pytest.mark.both_backends
async def test_the_turn_bound_fires_while_the_caller_is_slow_and_the_buffer_stays_bounded(workspace: str) -> None:
    seen: list[int] = []
    peak = [0, 0]

    async def slow(event: Event) -> None:
        seen.append(1)
        machine = s._inbox.turn
        if machine is not None:
            peak[0] = max(peak[0], len(machine.events))
            peak[1] = max(peak[1], machine.buffered_bytes)
        if len(seen) == 1:
            await anyio.sleep(4)  # a long pause (a database write): the agent floods meanwhile

    started = time.monotonic()
    async with open_session(workspace, fast_options(HOSTILE, turn_timeout_ms=1_500, read_timeout_ms=500)) as s:
        with anyio.fail_after(60):
            result = await s.run_turn("flood", slow)
    assert result.error is not None and result.error.kind is ErrorKind.TURN_TIMEOUT
    assert str(result.error) == "the turn ran past turn_timeout_ms (1500 ms)"
    # The buffer between the reader and the caller never grew past its bound (plus one read).
    assert peak[0] <= MAX_BUFFERED_EVENTS + 64 * 1024 // 60, peak
    assert peak[1] <= MAX_BUFFERED_BYTES + 64 * 1024, peak
    assert time.monotonic() - started < 40


async def test_a_slow_caller_is_not_taken_for_a_stalled_agent(workspace: str) -> None:
    paused = [False]

    async def slow(event: Event) -> None:
        if not paused[0]:
            paused[0] = True
            await anyio.sleep(2)  # longer than the stall bound; the agent is not the one silent

    options = fast_options(HOSTILE, stall_timeout_ms=800)
    async with open_session(workspace, options) as s:
        result = await s.run_turn(f"flood-then-end {MAX_BUFFERED_EVENTS * 3}", slow)
    assert result.ok, result


async def test_the_reader_stops_reading_while_the_caller_is_behind(workspace: str) -> None:
    async with open_session(workspace, fast_options(HOSTILE, turn_timeout_ms=30_000)) as s:
        async with s.turn("flood") as turn:
            await turn.__anext__()
            conn = s._conn
            assert conn is not None
            await wait_until(lambda: conn.reader_paused)
            received = conn.bytes_received
            await anyio.sleep(0.5)  # paused: nothing more is read however much the agent has to say
            assert conn.bytes_received == received
            turn.cancel()


@pytest.mark.both_backends
async def test_an_agent_that_stops_reading_while_asking_is_a_typed_failure(workspace: str) -> None:
    options = fast_options(HOSTILE, read_timeout_ms=800, turn_timeout_ms=60_000, stall_timeout_ms=60_000)
    peak = [0]
    async with open_session(workspace, options) as s:

        async def watch(event: Event) -> None:
            assert s._conn is not None
            peak[0] = max(peak[0], s._conn._queued_bytes)

        with anyio.fail_after(15):
            result = await s.run_turn("permissions", watch)
    assert result.error is not None and result.error.kind is ErrorKind.PORT_EXIT
    assert str(result.error) == "the agent stopped reading its input: a write waited read_timeout_ms (800 ms)"
    # The refusals stopped piling up at the high-water mark (plus one read's worth of requests).
    assert peak[0] <= WRITE_HIGH_WATER + 1024 * 1024, peak


async def test_deep_json_in_an_update_is_malformed_and_the_turn_goes_on(workspace: str) -> None:
    events: list[Event] = []
    async with open_session(workspace, fast_options(HOSTILE)) as s:
        result = await s.run_turn("deep-update 900", events.append)
        again = await s.run_turn("deep-update 10")
    assert result.ok and again.ok
    malformed = [e for e in events if isinstance(e, Malformed)]
    assert len(malformed) == 1 and malformed[0].detail.startswith("the line nests deeper than 64 levels")


@pytest.mark.parametrize("prompt", ["deep-answer 200", "garbled-answer"])
async def test_an_unreadable_prompt_answer_ends_the_turn_at_once(workspace: str, prompt: str) -> None:
    options = fast_options(HOSTILE, read_timeout_ms=500, stall_timeout_ms=60_000)
    with anyio.fail_after(10):  # not after the stall bound
        async with open_session(workspace, options) as s:
            result = await s.run_turn(prompt)
            follow_up = await s.run_turn("flood-then-end 3")
    assert result.error is not None and result.error.kind is ErrorKind.TURN_OUTCOME_UNKNOWN
    assert str(result.error).startswith("the agent's answer to the prompt could not be read: ")
    assert follow_up.ok


async def test_an_unreadable_start_up_answer_fails_the_start_at_once(workspace: str) -> None:
    options = fast_options([*HOSTILE, "--deep-initialize"], initialize_floor_ms=60_000)
    with anyio.fail_after(10), pytest.raises(RemoteAcpError) as info:  # not after the 60 s bound
        async with open_session(workspace, options):
            pass
    assert info.value.kind is ErrorKind.RESPONSE_ERROR
    assert str(info.value) == "the agent's answer to initialize could not be read: the line nests deeper than 64 levels"


@pytest.mark.both_backends
async def test_closing_a_session_ends_a_turn_running_in_another_task(workspace: str) -> None:
    results: list[TurnResult] = []
    events: list[Event] = []
    async with anyio.create_task_group() as tg:
        s = await start_session(tg, workspace, fast_options(scripted()))

        async def run() -> None:
            results.append(await s.run_turn("@sleep=30", events.append))

        tg.start_soon(run)
        await wait_until(lambda: s._inbox.turn is not None and s._inbox.turn.prompt_sent)
        with anyio.fail_after(5):
            await s.aclose()
            await wait_until(lambda: bool(results))
    (result,) = results
    assert result.error is not None and result.error.kind is ErrorKind.TURN_CANCELLED
    assert str(result.error) == "the session was closed while the turn was running"
    assert isinstance(events[-1], TurnCancelled)
    assert s.closed
    after = await s.run_turn("too late")
    assert after.outcome == "turn_not_started" and str(after.error) == "the session is closed"
    assert after.error is not None and not after.error.retryable


async def test_a_pool_uses_and_closes_warm_sessions_from_other_tasks(workspace: str) -> None:
    async with anyio.create_task_group() as sessions:
        pool = [await start_session(sessions, workspace, fast_options(scripted())) for _ in range(3)]
        pids = [s.pid for s in pool]
        results: list[TurnResult] = []
        async with anyio.create_task_group() as workers:
            for s in pool:
                workers.start_soon(_collect, s, results)
        assert len(results) == 3 and all(r.ok for r in results)
        async with anyio.create_task_group() as closers:
            for s in pool:
                closers.start_soon(s.aclose)
    assert len(set(pids)) == 3 and all(s.closed for s in pool)


async def _collect(s: Session, results: list[TurnResult]) -> None:
    results.append(await s.run_turn("hello"))


async def test_kill_ends_the_turn_at_once_and_skips_the_graceful_window(workspace: str) -> None:
    # The agent ignores the cancel and SIGTERM would be waited on for 10 s; kill() waits for neither.
    options = fast_options(scripted("--ignore-sigterm"), stop_grace_ms=10_000, read_timeout_ms=10_000)
    async with open_session(workspace, options) as s:
        async with s.turn("@sleep=30 @ignore-cancel") as turn:
            await wait_until(lambda: s._inbox.turn is not None and s._inbox.turn.prompt_sent)
            started = time.monotonic()
            s.kill()
            events = [e async for e in turn]
        assert isinstance(events[-1], TurnCancelled) and events[-1].message == "the turn was stopped at once"
    assert time.monotonic() - started < 5  # not the 10 s cancel wait, nor the 10 s grace


async def test_an_exception_inside_teardown_still_ends_everything(
    workspace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fault injection: a teardown step raises. The connection's tasks still end and the agent is
    # still killed (the suite's orphan check would catch it), and the error is not swallowed.
    async def broken(self: AgentProcess) -> None:
        raise RuntimeError("injected teardown fault")

    monkeypatch.setattr(AgentProcess, "terminate", broken)
    with anyio.fail_after(10), pytest.raises(RuntimeError, match="injected teardown fault"):
        async with open_session(workspace, fast_options(scripted())) as s:
            assert (await s.run_turn("hi")).ok
            pid = s.pid
    assert pid is not None


async def test_info_before_start_and_a_turn_iterated_outside_its_block_are_clear_errors(workspace: str) -> None:
    async with open_session(workspace, fast_options(scripted())) as s:
        turn = s.turn("hello")
        with pytest.raises(RuntimeError, match=r"iterate a turn inside its block"):
            turn.__aiter__()
        async with turn:
            events = [e async for e in turn]
        with pytest.raises(RuntimeError, match=r"this turn's block has ended"):
            await turn.__anext__()
    assert isinstance(events[-1], Event) and turn.result is not None and turn.result.ok


def test_misuse_is_refused_under_python_optimize_too(workspace: str) -> None:
    code = (
        "import anyio, sys\n"
        "from remote_acp import open_session, SessionOptions\n"
        "async def main():\n"
        "    opts = SessionOptions(command=[sys.executable, '-m', 'remote_acp.testing.scripted_agent'])\n"
        "    async with open_session(sys.argv[1], opts) as s:\n"
        "        try:\n"
        "            s.turn('x').__aiter__()\n"
        "        except RuntimeError as exc:\n"
        "            print('refused:', exc)\n"
        "anyio.run(main)\n"
    )
    done = subprocess.run([sys.executable, "-O", "-c", code, workspace], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip().startswith("refused: iterate a turn inside its block"), done.stderr


@pytest.mark.both_backends
@pytest.mark.usefixtures("no_gc_pauses")
async def test_fifty_sessions_keep_their_bounds_while_one_floods(workspace: str) -> None:
    results: dict[int, TurnResult] = {}
    ticker = Ticker()

    async def one(n: int) -> None:
        command, prompt = (HOSTILE, "flood") if n == 0 else (scripted(), "@sleep=0.5 @chunks=5 fine")
        async with open_session(workspace, fast_options(command, turn_timeout_ms=3_000)) as s:
            results[n] = await s.run_turn(prompt)

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker.run)
            async with anyio.create_task_group() as sessions:
                for n in range(50):
                    sessions.start_soon(one, n)
            tg.cancel_scope.cancel()
    assert len(results) == 50
    flood = results.pop(0)
    assert flood.error is not None and flood.error.kind is ErrorKind.TURN_TIMEOUT
    assert all(r.ok and r.last_message == "fine" for r in results.values()), [r for r in results.values() if not r.ok]
    assert ticker.worst_busy < 0.3, (ticker.worst_busy, ticker.worst)


async def test_events_of_a_flood_that_outruns_an_ending_are_counted_not_kept(workspace: str) -> None:
    # The caller is slow, the turn times out, the agent keeps flooding while the client reads on
    # for the runtime's answer: what no longer fits is dropped, and the count is reported.
    events: list[Event] = []

    async def slow(event: Event) -> None:
        events.append(event)
        if len(events) == 2:
            await anyio.sleep(3)

    options = fast_options(HOSTILE, turn_timeout_ms=1_000, read_timeout_ms=1_000)
    async with open_session(workspace, options) as s:
        result = await s.run_turn("flood", slow)
    assert isinstance(events[-1], TurnTimedOut) and result.error is not None
    dropped = [e for e in events if isinstance(e, Malformed) and "were dropped" in e.message]
    assert len(dropped) == 1
    chunks = [e for e in events if isinstance(e, Notification) and e.delta]
    assert len(chunks) <= 2 * MAX_BUFFERED_EVENTS + 64 * 1024 // 60


@pytest.mark.both_backends
async def test_a_failing_block_around_started_sessions_still_ends_and_leaves_nothing(workspace: str) -> None:
    # A scheduler starts sessions in its own task group and then fails before it could close
    # them: the group must still end (the sessions' own tasks are shielded) and take the agents
    # with it.
    pids: list[int | None] = []
    with anyio.fail_after(20), pytest.raises(ExceptionGroup) as info:
        async with anyio.create_task_group() as tg:
            pids += [(await start_session(tg, workspace, fast_options(scripted()))).pid for _ in range(3)]
            raise RuntimeError("the scheduler failed")
    assert info.group_contains(RuntimeError, match="the scheduler failed")
    assert all(pid is not None and not alive(pid) for pid in pids)


async def test_a_start_that_fails_in_a_callers_group_does_not_hold_the_group_open(workspace: str) -> None:
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            with pytest.raises(RemoteAcpError):
                await start_session(tg, workspace, fast_options(scripted("--init-error", "-32603:broken")))
