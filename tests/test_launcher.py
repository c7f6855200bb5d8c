"""The supervisor launcher: one small process per controller forks each session's supervisor.

Real processes throughout. What a fork inherits from the launcher instead of from the controller
(working directory, umask, limits, identity) must still be the controller's as it is at each
launch; a launcher that dies, stops answering or cannot take a request costs a session nothing
(its supervisor then starts on its own); and every launcher goes with the process that started it.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from remote_acp.targets.launch import LaunchSpec
from remote_acp.targets.process import fork_server as launchers
from remote_acp.targets.process.agent import SESSION_MARK, AgentProcess
from tests.support.agents import scripted
from tests.support.processes import alive, cmdline, gone_within, status, supervisor_of

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[1]


def spec(cwd: str | None, *args: str, env: dict[str, str] | None = None) -> LaunchSpec:
    return LaunchSpec(argv=scripted(*args), env=env if env is not None else dict(os.environ), cwd=cwd, target="local")


def open_files_limit(pid: int) -> tuple[int, int]:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError("no open files limit")


def launcher_pid() -> int | None:
    launcher = launchers._launcher
    return None if launcher is None else launcher.popen.pid


async def started(launch: LaunchSpec) -> AgentProcess:
    return await AgentProcess.start(launch)


async def ended(process: AgentProcess) -> None:
    await process.kill()
    supervisor = process.supervisor_pid
    process.release()
    assert await gone_within([process.pid, supervisor], 10)


@pytest.fixture
def restored() -> Iterator[None]:
    """The test process's umask, working directory and open-files limit, as they were."""
    mask = os.umask(0o022)
    os.umask(mask)
    cwd = os.getcwd()
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        yield
    finally:
        os.umask(mask)
        os.chdir(cwd)
        resource.setrlimit(resource.RLIMIT_NOFILE, limit)


async def test_one_launcher_forks_every_supervisor_and_a_fork_starts_no_interpreter(workspace: str) -> None:
    processes = [await started(spec(workspace)) for _ in range(3)]
    try:
        launcher = launcher_pid()
        assert launcher is not None and launcher != os.getpid()
        assert b"_supervisor.serve" in cmdline(launcher)
        for process in processes:
            assert supervisor_of(process.pid) == process.supervisor_pid
            assert supervisor_of(process.supervisor_pid) == launcher  # forked, not started here
            assert process.contained
            # A fork: the supervisor runs the launcher's program, not an interpreter of its own
            # started with a supervisor's command line.
            assert cmdline(process.supervisor_pid) == cmdline(launcher)
    finally:
        for process in processes:
            await ended(process)
    assert alive(launcher)  # it outlives the sessions, for the next one


@pytest.mark.usefixtures("restored")
async def test_the_agent_gets_the_controllers_directory_umask_and_limits_as_they_are_at_its_launch(
    workspace: str, tmp_path: Path
) -> None:
    first = await started(spec(workspace))
    launcher = launcher_pid()
    await ended(first)
    # Changed after the launcher started: the next agent must still see the controller's.
    os.umask(0o027)
    os.chdir(tmp_path)
    dump = tmp_path / "env.json"
    process = await started(spec(None, "--env-dump", str(dump), env={"ONLY": "this"}))
    try:
        assert launcher_pid() == launcher  # the same launcher forked it
        with anyio.fail_after(10):
            while not dump.exists() or not dump.read_text():  # noqa: ASYNC110 - another process's file
                await anyio.sleep(0.02)
        assert status(process.pid)["Umask"] == "0027"
        assert os.readlink(f"/proc/{process.pid}/cwd") == str(tmp_path)
        seen = json.loads(dump.read_text())
        assert seen.pop("__cwd__") == str(tmp_path)
        assert set(seen) - {"ONLY", SESSION_MARK} <= {"LC_CTYPE"}  # none of the launcher's or ours
        assert seen["ONLY"] == "this"
    finally:
        await ended(process)
    # A limit the launcher did not start with: another launcher, which has it, forks the next.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 512) - 1, hard))
    process = await started(spec(workspace))
    try:
        assert open_files_limit(process.pid) == (min(soft, 512) - 1, hard)
        assert launcher_pid() != launcher
        assert launcher is not None and not alive(launcher)
    finally:
        await ended(process)


async def test_a_killed_launcher_is_replaced_and_the_running_sessions_keep_their_supervisors(workspace: str) -> None:
    running = await started(spec(workspace))
    try:
        launcher = launcher_pid()
        assert launcher is not None
        os.kill(launcher, signal.SIGKILL)
        assert await gone_within([launcher], 10)
        assert running.contained and alive(running.pid)
        later = await started(spec(workspace))
        try:
            assert launcher_pid() not in (None, launcher)
            assert supervisor_of(later.supervisor_pid) == launcher_pid()
        finally:
            await ended(later)
    finally:
        await ended(running)


async def test_a_launcher_that_stops_answering_costs_a_launch_its_bound_then_is_replaced(
    workspace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await ended(await started(spec(workspace)))
    launcher = launcher_pid()
    assert launcher is not None
    monkeypatch.setattr(launchers, "FORK_BOUND_S", 0.5)
    os.kill(launcher, signal.SIGSTOP)
    try:
        with anyio.fail_after(10):
            process = await started(spec(workspace))
        try:
            assert supervisor_of(process.supervisor_pid) == os.getpid()  # started on its own
            assert process.contained
        finally:
            await ended(process)
        assert launcher_pid() is None and await gone_within([launcher], 10)
    finally:
        if alive(launcher):
            os.kill(launcher, signal.SIGKILL)
    replacement = await started(spec(workspace))
    try:
        assert launcher_pid() not in (None, launcher)
    finally:
        await ended(replacement)


async def test_a_request_too_large_for_the_launcher_starts_its_supervisor_on_its_own(workspace: str) -> None:
    await ended(await started(spec(workspace)))
    launcher = launcher_pid()
    big = {**os.environ, **{f"BIG_{i}": "x" * 100_000 for i in range(12)}}  # 1.2 MB: execve takes it
    process = await started(spec(workspace, env=big))
    try:
        assert supervisor_of(process.supervisor_pid) == os.getpid()
        assert process.contained
    finally:
        await ended(process)
    assert launcher_pid() == launcher and launcher is not None and alive(launcher)  # kept: not its fault


@pytest.mark.parametrize(
    ("env", "message"),
    [({"A\0B": "1"}, "embedded null byte"), ({"A": "1\0"}, "embedded null byte"), ({"A=B": "1"}, "illegal")],
    ids=["nul-in-name", "nul-in-value", "equals-in-name"],
)
def test_an_environment_that_cannot_be_passed_is_refused_as_subprocess_refuses_it(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        launchers.encode_request(["/bin/true"], env, None)
    with pytest.raises(ValueError, match=message):
        subprocess.Popen(["/bin/true"], env=env)


CONTROLLER = textwrap.dedent(
    """
    import os, sys, anyio
    from remote_acp.targets.launch import LaunchSpec
    from remote_acp.targets.process.agent import AgentProcess
    from tests.support.agents import scripted

    async def main():
        spec = LaunchSpec(argv=scripted(), env=dict(os.environ), cwd=sys.argv[1], target="local")
        process = await AgentProcess.start(spec)
        print(process.pid, process.supervisor_pid, flush=True)
        await anyio.sleep(600)

    anyio.run(main)
    """
)


async def test_the_launcher_goes_with_the_controller_however_it_ends(workspace: str) -> None:
    controller = subprocess.Popen(  # noqa: ASYNC220 - started once, waited for below
        [sys.executable, "-c", CONTROLLER, workspace], stdout=subprocess.PIPE, cwd=REPO
    )
    try:
        assert controller.stdout is not None
        with anyio.fail_after(30):
            line = await anyio.to_thread.run_sync(controller.stdout.readline)
        agent, supervisor = (int(word) for word in line.split())
        launcher = supervisor_of(supervisor)
        assert launcher != controller.pid and supervisor_of(launcher) == controller.pid
        controller.kill()
        controller.wait()
        assert await gone_within([agent, supervisor, launcher], 10)
    finally:
        controller.kill()
        controller.wait()
        assert controller.stdout is not None
        controller.stdout.close()


DEV_MODE_CONTROLLER = textwrap.dedent(
    """
    import sys, anyio
    from remote_acp import SessionOptions, open_session
    from remote_acp.targets.process import fork_server as launcher
    from tests.support.agents import scripted

    async def main():
        with anyio.fail_after(30):
            async with open_session(sys.argv[1], SessionOptions(command=scripted(), stop_grace_ms=1000)):
                pass
        print(launcher._launcher.popen.pid, flush=True)  # still running: ending the process ends it

    anyio.run(main)
    """
)


def test_the_launcher_is_closed_at_interpreter_exit_without_a_resource_warning(workspace: str) -> None:
    done = subprocess.run(
        [sys.executable, "-X", "dev", "-W", "error::ResourceWarning", "-c", DEV_MODE_CONTROLLER, workspace],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert not alive(int(done.stdout))


async def test_a_prestarted_launcher_forks_the_first_session(workspace: str) -> None:
    launchers.prestart_launcher()
    launcher = launcher_pid()
    assert launcher is not None and alive(launcher)
    process = await started(spec(workspace))
    try:
        assert supervisor_of(process.supervisor_pid) == launcher
    finally:
        await ended(process)


async def test_without_a_launcher_every_supervisor_starts_on_its_own(
    workspace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As where pidfd_open is missing: the supervisors would not be our children, untraceable.
    monkeypatch.setattr(launchers, "USABLE", False)
    launchers.prestart_launcher()
    process = await started(spec(workspace))
    try:
        assert launcher_pid() is None
        assert supervisor_of(process.supervisor_pid) == os.getpid() and process.contained
    finally:
        await ended(process)
