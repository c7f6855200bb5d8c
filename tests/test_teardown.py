"""Teardown: the fixed order, its bounds, and that no process of the agent's survives.

The autouse orphan check (tests/conftest.py) also proves, after each test, that nothing the
agent started is still alive, including children that left its process group.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import sys
import textwrap
import time
from typing import TYPE_CHECKING

import anyio
import pytest

from remote_acp import ErrorKind, LocalTarget, RemoteAcpError, open_session
from remote_acp.errors import Cause
from remote_acp.session.core import Session, _started
from remote_acp.targets.process.agent import AgentProcess
from tests.support.agents import fast_options, give_up_on_turn, scripted, wait_until
from tests.support.orphans import alive

if TYPE_CHECKING:
    import contextlib
    from collections.abc import Sequence
    from pathlib import Path

    from remote_acp.targets.agent_end import AgentEnd
    from remote_acp.targets.exit_status import ExitStatus
    from remote_acp.targets.launch import LaunchSpec

pytestmark = pytest.mark.anyio


async def dies_soon(pid: int, within: float = 2.0) -> bool:
    """SIGKILL is delivered asynchronously: give a killed descendant a moment to be gone."""
    deadline = time.monotonic() + within
    while alive(pid) and time.monotonic() < deadline:  # noqa: ASYNC110 - polling another process
        await anyio.sleep(0.02)
    return not alive(pid)


def pid_written(path: Path) -> int | None:
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return None


def methods(record: Path) -> list[str]:
    return [json.loads(line).get("method", "<response>") for line in record.read_text().splitlines()]


@pytest.mark.both_backends
async def test_cooperative_agent_is_reaped(workspace: str) -> None:
    async with open_session(workspace, fast_options(scripted())) as s:
        pid = s.pid
        assert pid is not None and alive(pid)
    assert not alive(pid)
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # noqa: ASYNC222 - WNOHANG never blocks; reaped means no zombie


async def test_agent_ignoring_sigterm_is_killed_after_the_grace_window(
    workspace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    # It ignores SIGTERM and keeps running after its stdin closes.
    options = fast_options(scripted("--ignore-sigterm", "--no-stdin-eof-exit"), stop_grace_ms=300)
    async with open_session(workspace, options) as s:
        pid = s.pid
        assert pid is not None
    assert not alive(pid)
    assert "agent did not exit inside the graceful period and was force-terminated" in caplog.messages


@pytest.mark.parametrize("mode", ["setsid", "hold-stdout"])
async def test_descendants_die_with_the_session(workspace: str, tmp_path: Path, mode: str) -> None:
    pid_file = tmp_path / "child.pid"
    options = fast_options(scripted("--child", mode, "--child-pid-file", str(pid_file)))
    async with open_session(workspace, options) as s:
        result = await s.run_turn("hi")
        assert result.ok
        child = int(pid_file.read_text())
        assert alive(child)
        if mode == "setsid":
            assert os.getpgid(child) != s.pid  # it really left the group
    deadline = time.monotonic() + 2
    while alive(child) and time.monotonic() < deadline:  # noqa: ASYNC110 - polling another process
        await anyio.sleep(0.02)
    assert not alive(child)


async def test_descendant_holding_stdout_after_exit_is_released_within_the_bound(
    workspace: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    pid_file = tmp_path / "child.pid"
    options = fast_options(scripted("--child-pid-file", str(pid_file)), output_drain_ms=400)
    async with open_session(workspace, options) as s:
        with anyio.fail_after(3):
            result = await s.run_turn("@exit-holding-stdout")
        assert result.error is not None
        assert result.error.kind is ErrorKind.PORT_EXIT
        assert result.error.message == "the agent runtime exited before the session finished collecting its output"
        later = await s.run_turn("again")  # a turn that never started is a result too
        assert later.outcome == "turn_not_started"
        assert later.error is not None and later.error.kind is ErrorKind.PORT_EXIT
        assert str(later.error) == "the agent runtime exited before the session finished collecting its output"
        child = int(pid_file.read_text())
    records = [r for r in caplog.records if r.getMessage().startswith("agent stdout was not fully collected")]
    assert len(records) == 1 and records[0].__dict__["drain_bound"] == "0.4s"
    assert await dies_soon(child)


async def test_agent_that_stops_reading_cannot_wedge_turn_or_teardown(workspace: str) -> None:
    # The agent asks for permission with a 4 MiB option id, so our answer cannot fit in the
    # pipe, then stops reading stdin for good and never answers the prompt.
    options = fast_options(scripted(), turn_timeout_ms=500, read_timeout_ms=300, stop_grace_ms=400)
    with anyio.fail_after(10):
        async with open_session(workspace, options) as s:
            result = await s.run_turn("@stop-reading")
            # Our answer cannot be written: a typed failure within a bound (the session's own
            # tests pin which bound wins; here only that one does).
            assert result.error is not None
            assert result.error.kind in (ErrorKind.PORT_EXIT, ErrorKind.TURN_TIMEOUT)
            after = await s.run_turn("next")  # bounded, never wedged
            assert after.error is not None and after.outcome == "turn_not_started"


CLOSES_STDIN_AGENT = textwrap.dedent(
    """
    import json, os, sys, time
    def send(obj):
        sys.stdout.write(json.dumps(obj) + "\\n"); sys.stdout.flush()
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["method"] == "initialize":
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {"protocolVersion": 1}})
        elif msg["method"] == "session/new":
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {"sessionId": "s"}})
        elif msg["method"] == "session/prompt":
            os.close(0)  # stop reading for good, but keep stdout open
            send({"jsonrpc": "2.0", "id": 0, "method": "session/request_permission",
                  "params": {"sessionId": "s", "toolCall": {"toolCallId": "t"},
                             "options": [{"optionId": "no", "kind": "reject_once", "name": "No"}]}})
            time.sleep(60)
    """
)


async def test_failed_write_during_turn_ends_port_exit_after_read_timeout(workspace: str) -> None:
    options = fast_options([sys.executable, "-c", CLOSES_STDIN_AGENT], read_timeout_ms=300)
    async with open_session(workspace, options) as s:
        with anyio.fail_after(3):
            result = await s.run_turn("hello")
    assert result.error is not None and result.error.kind is ErrorKind.PORT_EXIT
    assert str(result.error) == "a write to the agent failed and no answer followed within read_timeout_ms"


async def test_session_close_sent_only_when_advertised(workspace: str, tmp_path: Path) -> None:
    advertised = tmp_path / "a.jsonl"
    async with open_session(workspace, fast_options(scripted("--advertise", "close", "--record", str(advertised)))):
        pass
    plain = tmp_path / "b.jsonl"
    async with open_session(workspace, fast_options(scripted("--record", str(plain)))):
        pass
    assert methods(advertised) == ["initialize", "session/new", "session/close"]
    assert methods(plain) == ["initialize", "session/new"]


async def test_a_request_between_turns_is_answered_on_arrival_so_none_is_open_at_teardown(
    workspace: str, tmp_path: Path
) -> None:
    # Teardown has no "answer the requests still open" step: every request is answered the
    # moment it is read. Here the request arrives after the turn was settled without it.
    record = tmp_path / "rec.jsonl"
    options = fast_options(scripted("--record", str(record)), read_timeout_ms=200)
    async with open_session(workspace, options) as s:
        await give_up_on_turn(s, "@ignore-cancel @sleep=0.5 @permission")

        def answered() -> bool:
            lines = record.read_text().splitlines() if record.exists() else []
            return any("method" not in json.loads(line) for line in lines)

        await wait_until(answered)
        assert s._conn is not None and not s._conn.peer.open_incoming
    answers = [a for a in map(json.loads, record.read_text().splitlines()) if "method" not in a]
    assert [a["result"] for a in answers] == [{"outcome": {"outcome": "selected", "optionId": "reject"}}]


async def test_cancelled_start_still_reaps_the_agent(workspace: str, tmp_path: Path) -> None:
    pid_file = tmp_path / "agent.pid"
    options = fast_options(scripted("--never-answer", "initialize", "--pid-file", str(pid_file)))
    with anyio.move_on_after(0.5) as scope:
        async with open_session(workspace, options):
            pass
    assert scope.cancelled_caught
    assert not alive(int(pid_file.read_text()))


@dataclasses.dataclass(frozen=True)
class SlowStart:
    """The local target, with an agent start that takes a second, shielded as every start is:
    what a start on a loaded machine looks like to a caller cancelled meanwhile."""

    inner: LocalTarget = dataclasses.field(default_factory=LocalTarget)
    pids: list[int] = dataclasses.field(default_factory=list)

    @property
    def label(self) -> str:
        return self.inner.label

    @property
    def remote(self) -> bool:
        return False

    async def prepare(self, command: str | Sequence[str], workspace: str) -> LaunchSpec:
        return dataclasses.replace(await self.inner.prepare(command, workspace), starter=self._start)

    def start_slot(self) -> contextlib.AbstractAsyncContextManager[None]:
        return self.inner.start_slot()

    def exit_error(self, status: ExitStatus, *, agent_wrote: bool, stderr: str, ready: bool | None = None) -> None:
        return None

    async def _start(self, spec: LaunchSpec, *, stderr_tail_bytes: int) -> AgentEnd:
        with anyio.CancelScope(shield=True):
            await anyio.sleep(1)
            started = await AgentProcess.start(spec, stderr_tail_bytes=stderr_tail_bytes)
        self.pids.append(started.pid)
        return started


async def test_a_start_that_ends_after_its_caller_was_cancelled_still_reaps_the_agent(workspace: str) -> None:
    # The session's guard closes it while the agent is still starting; the start then ends, and
    # its agent must not be left running with the session's tasks waiting on it forever.
    target = SlowStart()
    options = fast_options(scripted("--never-answer", "initialize"))
    with anyio.fail_after(10), anyio.move_on_after(0.3) as scope:
        async with open_session(workspace, options, target=target):
            pass
    assert scope.cancelled_caught
    (pid,) = target.pids
    assert not alive(pid)


async def test_a_session_closed_from_another_task_while_its_agent_starts_fails_the_start(workspace: str) -> None:
    # Not through the public entry points (they hand the session over only once it started):
    # a pool or a scheduler holding the session object closes it while its agent starts.
    target = SlowStart()
    session = Session(target, workspace, fast_options(scripted("--never-answer", "initialize")))

    async def close_soon() -> None:
        await anyio.sleep(0.3)
        await session.aclose()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(close_soon)
            with pytest.raises(RemoteAcpError) as caught:
                await _started(session, tg)
            tg.cancel_scope.cancel()
    assert (caught.value.kind, caught.value.cause) == (ErrorKind.PORT_EXIT, Cause.CANCELLED)
    assert caught.value.message == "the session was closed while its agent was starting"
    (pid,) = target.pids
    assert not alive(pid)


async def test_session_close_that_never_answers_is_bounded(workspace: str, caplog: pytest.LogCaptureFixture) -> None:
    # Half of the grace window at most goes to the close; the signal still follows in time.
    agent = scripted("--advertise", "close", "--never-answer", "session/close")
    with anyio.fail_after(3):
        async with open_session(workspace, fast_options(agent, stop_grace_ms=600)) as s:
            pid = s.pid
            assert pid is not None
    assert not alive(pid)
    records = [r for r in caplog.records if r.getMessage() == "session/close did not complete before the wait ended"]
    assert len(records) == 1 and records[0].levelno == logging.WARNING
    assert records[0].__dict__["bound_s"] <= 0.3


async def test_agent_dying_on_session_close_does_not_stop_teardown(workspace: str, tmp_path: Path) -> None:
    record = tmp_path / "rec.jsonl"
    agent = scripted("--advertise", "close", "--record", str(record), "--crash-at", "session/close", "--stderr", "")
    async with open_session(workspace, fast_options(agent)) as s:
        pid = s.pid
        assert pid is not None
    assert not alive(pid)
    assert methods(record)[-1] == "session/close"


DAEMONIZING_AGENT = textwrap.dedent(
    """
    import json, os, subprocess, sys, time
    PID_FILE = sys.argv[1]
    DAEMON = (
        "import os, sys, time\\n"
        "if os.fork(): os._exit(0)\\n"  # the intermediate exits: the daemon loses its parent
        "os.setsid()\\n"
        "open(sys.argv[1], 'w').write(str(os.getpid()))\\n"
        "time.sleep(600)\\n"
    )
    def send(obj):
        sys.stdout.write(json.dumps(obj) + "\\n"); sys.stdout.flush()
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["method"] == "initialize":
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {"protocolVersion": 1}})
        elif msg["method"] == "session/new":
            subprocess.run([sys.executable, "-c", DAEMON, PID_FILE], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {"sessionId": "s"}})
    """
)


async def test_a_daemonized_descendant_without_our_pipes_dies_with_the_session(workspace: str, tmp_path: Path) -> None:
    pid_file = tmp_path / "daemon.pid"
    async with open_session(workspace, fast_options([sys.executable, "-c", DAEMONIZING_AGENT, str(pid_file)])):
        deadline = time.monotonic() + 5
        # The daemon writes its pid after it opened the file: wait for the whole number.
        while (daemon := pid_written(pid_file)) is None:
            assert time.monotonic() < deadline, "the daemon never wrote its pid"
            await anyio.sleep(0.02)
        assert alive(daemon) and os.getsid(daemon) == daemon  # its own session, parent gone
    deadline = time.monotonic() + 2
    while alive(daemon) and time.monotonic() < deadline:  # noqa: ASYNC110 - polling another process
        await anyio.sleep(0.02)
    assert not alive(daemon)


async def test_a_process_the_application_forked_is_not_taken_for_the_agents(workspace: str, tmp_path: Path) -> None:
    import multiprocessing

    pid_file = tmp_path / "child.pid"
    async with open_session(
        workspace, fast_options(scripted("--child-pid-file", str(pid_file)), output_drain_ms=300)
    ) as s:
        # A worker forked now inherits our ends of the agent's pipes.
        worker = multiprocessing.get_context("fork").Process(target=time.sleep, args=(30,))
        worker.start()
        result = await s.run_turn("@exit-holding-stdout")  # a holder of the agent's end appears
        assert result.error is not None and result.error.kind is ErrorKind.PORT_EXIT
    try:
        assert await dies_soon(int(pid_file.read_text()))
        assert worker.is_alive()  # teardown killed the agent's holder, not the application's worker
    finally:
        worker.kill()
        worker.join()


async def test_an_application_ignoring_sigchld_does_not_stall_teardown(
    workspace: str, caplog: pytest.LogCaptureFixture
) -> None:
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # our children are reaped by the kernel
    try:
        async with open_session(workspace, fast_options(scripted(), stop_grace_ms=3000)) as s:
            result = await s.run_turn("@crash=7")
        assert result.error is not None and result.error.kind is ErrorKind.PORT_EXIT
        # The agent is the supervisor's child, not ours: its status is still known.
        assert "exit status 7" in result.error.detail
    finally:
        signal.signal(signal.SIGCHLD, previous)
    assert "agent did not exit inside the graceful period and was force-terminated" not in caplog.messages
