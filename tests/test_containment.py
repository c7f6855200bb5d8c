"""Containment: no process of the agent's outlives its session or the process that opened it.

Real processes throughout: a controller process killed with SIGKILL mid-turn, agents whose
descendants fork late, leave the session and scrub their environment. The suite's orphan check
(conftest.py) also catches an escapee without the marker, through the test process being a
child subreaper.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio
import pytest

from remote_acp import open_session
from remote_acp.targets.launch import LaunchSpec
from remote_acp.targets.process.agent import AgentProcess
from tests.support.agents import fast_options, scripted, wait_until
from tests.support.processes import alive, environ, gone_within, supervisor_of

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[1]
LATE_FORKING_AGENT = REPO / "tests" / "agents" / "late_forking_agent.py"

# A controller: opens a session whose agent has a child that left its session, starts a long
# turn, says the pids, then waits to be killed.
CONTROLLER = textwrap.dedent(
    """
    import multiprocessing, sys, time, anyio
    from remote_acp import open_session
    from tests.support.agents import fast_options, scripted

    async def main(workspace, child_pid_file, fork_worker):
        # It outlives its stdin and SIGTERM: only SIGKILL from the supervisor can stop it.
        agent = scripted(
            "--child", "setsid", "--child-pid-file", child_pid_file, "--no-stdin-eof-exit", "--ignore-sigterm"
        )
        async with open_session(workspace, fast_options(agent)) as s, anyio.create_task_group() as tg:
            tg.start_soon(s.run_turn, "@sleep=120")
            await anyio.sleep(0.2)
            worker = 0
            if fork_worker == "fork-worker":  # a copy of this process, made while the session runs
                process = multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,))
                process.start()
                worker = process.pid
            print(s.pid, open(child_pid_file).read().strip(), worker, flush=True)
            await anyio.sleep(600)

    anyio.run(main, *sys.argv[1:4], backend=sys.argv[4])
    """
)


def pid_in(path: Path) -> int | None:
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return None


async def read_pid_file(path: Path, seconds: float = 10.0) -> int:
    deadline = time.monotonic() + seconds
    while (pid := pid_in(path)) is None:
        assert time.monotonic() < deadline, f"{path} never appeared"
        await anyio.sleep(0.02)
    return pid


@pytest.mark.parametrize(
    ("backend", "fork"),
    [("asyncio", "no"), ("trio", "no"), ("asyncio", "fork-worker")],
    ids=["asyncio", "trio", "fork"],
)
async def test_controller_killed_mid_turn_takes_the_agent_tree_with_it(
    workspace: str, tmp_path: Path, backend: str, fork: str
) -> None:
    # With "fork-worker" a forked copy of the controller outlives it: it must keep neither the
    # tree nor the launcher.
    controller = subprocess.Popen(  # noqa: ASYNC220 - started once, waited for in a thread
        [sys.executable, "-c", CONTROLLER, workspace, str(tmp_path / "child.pid"), fork, backend],
        stdout=subprocess.PIPE,
        cwd=REPO,
    )
    try:
        assert controller.stdout is not None
        with anyio.fail_after(30):
            line = await anyio.to_thread.run_sync(controller.stdout.readline)
        agent, child, worker = (int(word) for word in line.split())
        supervisor = supervisor_of(agent)
        launcher = supervisor_of(supervisor)  # the controller's: it forked the supervisor
        assert launcher != controller.pid and supervisor_of(launcher) == controller.pid
        assert alive(agent) and alive(child) and alive(supervisor)
        assert os.getsid(child) == child and os.getsid(agent) == agent  # both left the group
        controller.kill()
        controller.wait()
        assert await gone_within([agent, child, supervisor, launcher], 10)
        if worker:
            assert alive(worker)
            os.kill(worker, signal.SIGKILL)
            assert await gone_within([worker], 10)
    finally:
        controller.kill()
        controller.wait()
        assert controller.stdout is not None
        controller.stdout.close()


@pytest.mark.both_backends
async def test_a_setsid_child_forked_by_the_sigterm_handler_dies_with_the_session(
    workspace: str, tmp_path: Path
) -> None:
    pid_file = tmp_path / "late.pid"
    agent = [sys.executable, str(LATE_FORKING_AGENT), "--sigterm-setsid", str(pid_file)]
    async with open_session(workspace, fast_options(agent, stop_grace_ms=3000)) as s:
        assert (await s.run_turn("hi")).ok
    # The child was forked during teardown, after its SIGTERM: teardown still found it.
    late = await read_pid_file(pid_file)
    assert await gone_within([late], 5)


@pytest.mark.both_backends
async def test_a_double_forked_child_with_a_scrubbed_environment_dies_with_the_session(
    workspace: str, tmp_path: Path
) -> None:
    pid_file = tmp_path / "scrubbed.pid"
    agent = [sys.executable, str(LATE_FORKING_AGENT), "--scrubbed", str(pid_file)]
    async with open_session(workspace, fast_options(agent)) as s:
        scrubbed = await read_pid_file(pid_file)
        await wait_until(lambda: not environ(scrubbed), within=5)  # until its exec cleared it
        assert alive(scrubbed) and os.getsid(scrubbed) != s.pid
        assert supervisor_of(scrubbed) == supervisor_of(s.pid or 0)  # reparented to the supervisor
    assert await gone_within([scrubbed], 5)


def spec(workspace: str, *args: str) -> LaunchSpec:
    return LaunchSpec(argv=scripted(*args), env=dict(os.environ), cwd=workspace, target="local")


@pytest.mark.both_backends
async def test_terminate_then_kill_leaves_nothing_and_keeps_the_exit_status(workspace: str, tmp_path: Path) -> None:
    process = await AgentProcess.start(spec(workspace, "--child", "setsid", "--child-pid-file", str(tmp_path / "c")))
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(process.watch_exit)
            child = await read_pid_file(tmp_path / "c")
            supervisor = process.supervisor_pid
            assert process.contained
            await process.terminate()  # the scripted agent exits on SIGTERM; its child too
            with anyio.fail_after(10):
                await process.exited.wait()
            assert process.exit_status is not None and process.exit_status.signal == signal.SIGTERM
            await process.kill()
            assert not alive(child) and not alive(process.pid)
            assert process.reap() == process.exit_status
            with pytest.raises(ChildProcessError):
                os.waitpid(supervisor, os.WNOHANG)  # noqa: ASYNC222 - WNOHANG never blocks
    finally:
        process.release()


async def test_kill_ends_an_agent_that_ignores_sigterm(workspace: str, tmp_path: Path) -> None:
    process = AgentProcess.spawn(spec(workspace, "--ignore-sigterm", "--pid-file", str(tmp_path / "pid")))
    try:
        await read_pid_file(tmp_path / "pid")  # written once SIGTERM is ignored
        await process.terminate()
        await process.kill()
        assert not alive(process.pid)
        status = process.reap()
        assert status is not None and status.signal == signal.SIGKILL
        assert process.exited.is_set()
    finally:
        process.release()


async def test_a_released_process_takes_its_tree_with_it(workspace: str, tmp_path: Path) -> None:
    # Teardown that never called kill(): closing the lifeline is enough.
    process = AgentProcess.spawn(spec(workspace, "--child", "setsid", "--child-pid-file", str(tmp_path / "c")))
    child = await read_pid_file(tmp_path / "c")
    supervisor = process.supervisor_pid
    process.release()
    assert await gone_within([process.pid, child, supervisor], 10)


async def test_pipe_holders_of_ours_are_killed_off_the_loop(workspace: str, tmp_path: Path) -> None:
    process = AgentProcess.spawn(spec(workspace, "--child", "hold-stdout", "--child-pid-file", str(tmp_path / "c")))
    try:
        child = await read_pid_file(tmp_path / "c")
        await process.kill_pipe_holders_off_loop()  # the agent and its child both hold its stdout
        assert await gone_within([child, process.pid], 5)
        await process.kill()
    finally:
        process.release()


async def test_without_its_supervisor_kill_falls_back_to_the_group_and_the_mark(workspace: str, tmp_path: Path) -> None:
    # The supervisor SIGKILLed: its tree is uncontained, as on a system without a subreaper.
    process = AgentProcess.spawn(spec(workspace, "--child", "setsid", "--child-pid-file", str(tmp_path / "c")))
    try:
        child = await read_pid_file(tmp_path / "c")
        os.kill(process.supervisor_pid, signal.SIGKILL)
        with anyio.fail_after(10):
            while not process.supervisor_gone:  # noqa: ASYNC110 - another process's state
                await anyio.sleep(0.02)
        assert not process.contained and alive(process.pid) and alive(child)
        await process.kill()
        assert await gone_within([process.pid, child], 5)
    finally:
        process.release()


def test_the_supervisor_boots_from_any_directory_and_only_its_own_module_is_taken_from_there(tmp_path: Path) -> None:
    # Quotes, a space and a backslash in the install path; a file beside it named like a
    # standard module it imports must not replace that module.
    from remote_acp.targets.process.containment import SUPERVISOR_SCRIPT, boot_code

    home = tmp_path / 'it\'s a \\ "dir"'
    home.mkdir()
    (home / "_supervisor.py").write_text(Path(SUPERVISOR_SCRIPT).read_text())
    (home / "select.py").write_text("raise SystemExit('the decoy select was imported')\n")
    life_r, life_w = os.pipe()
    rep_r, rep_w = os.pipe()
    argv = [sys.executable, "-I", "-S", "-c", boot_code(str(home)), str(life_r), str(rep_w), str(os.getpid()), ""]
    supervisor = subprocess.Popen([*argv, "--", "/bin/true"], pass_fds=(life_r, rep_w), stderr=subprocess.PIPE)
    os.close(life_r)
    os.close(rep_w)
    reports = b""
    while b"X" not in reports and (chunk := os.read(rep_r, 256)):
        reports += chunk
    os.close(life_w)  # end of the lifeline: the supervisor kills what is left and exits
    _, stderr = supervisor.communicate(timeout=30)
    os.close(rep_r)
    assert supervisor.returncode == 0, stderr
    assert b"\nP" in reports and reports.endswith(b"X0 0\n")
