"""A session with a reattach window outlives its controller: a controller killed with SIGKILL
mid-turn leaves the agent running on the host, and another process takes the session over with
its handle, gets the rest of the turn (nothing twice), runs more turns, and closes it for good.
While nobody is attached the agent's output is kept on the host, bounded: a flood blocks the
agent instead of filling the disk, and the taker gets every byte."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

import anyio
import pytest

from remote_acp import SessionHandle, attach_session
from remote_acp.targets.ssh.settings import SshSettings
from tests.support.agents import fast_options, scripted
from tests.support.processes import alive, gone_within, read_line
from tests.support.reattach_controller import OPTIONS
from tests.support.reattach_host import CHUNK, HostSession, TurnLog, ssh_of

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from integration.sshlab import SshLab

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[1]
WINDOW_S = 30


@dataclass
class DeadController:
    """What the killed controller left: the handle it printed, and the text it had delivered."""

    handle: SessionHandle
    deltas: list[str]


async def next_line(stdout: IO[bytes], what: str) -> bytes:
    return await anyio.to_thread.run_sync(lambda: read_line(stdout, within=30, what=what))


@pytest.fixture
async def controller_of(ssh_lab: SshLab) -> AsyncIterator[ControllerRun]:
    run = ControllerRun(ssh_lab)
    try:
        yield run
    finally:
        run.stop()


class ControllerRun:
    """Starts :mod:`tests.support.reattach_controller` and kills it (SIGKILL) when told."""

    def __init__(self, lab: SshLab) -> None:
        self.lab = lab
        self.proc: subprocess.Popen[bytes] | None = None

    async def kill_after(self, prompt: str, deltas: int) -> DeadController:
        """Run ``prompt`` in a new controller; SIGKILL it once it delivered ``deltas`` pieces of
        text, and wait (bounded) until its local ssh is gone too."""
        self.proc = proc = subprocess.Popen(  # noqa: ASYNC220 - started once, its output read in a thread
            [
                sys.executable,
                "-m",
                "tests.support.reattach_controller",
                str(self.lab.config),
                "lab1",
                str(WINDOW_S),
                prompt,
            ],
            stdout=subprocess.PIPE,
            cwd=REPO,
        )
        assert proc.stdout is not None
        first = await next_line(proc.stdout, "the controller's handle")
        word, _, data = first.partition(b" ")
        assert word == b"handle", first
        handle = SessionHandle.from_json(json.loads(data))
        seen: list[str] = []
        while len(seen) < deltas:
            word, _, data = (await next_line(proc.stdout, "the controller's next delta")).partition(b" ")
            assert word == b"delta", (word, data)
            seen.append(json.loads(data))
        ssh = ssh_of(proc.pid)
        assert ssh, "the controller runs no ssh"
        proc.kill()
        proc.wait()
        assert await gone_within(ssh, 10), "the dead controller's ssh outlived it"
        return DeadController(handle, seen)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            assert self.proc.stdout is not None
            self.proc.stdout.close()


def settings(lab: SshLab) -> SshSettings:
    return SshSettings(config_file=str(lab.config))


async def test_a_controller_killed_mid_turn_hands_the_turn_over_with_nothing_lost_or_repeated(
    ssh_lab: SshLab, controller_of: ControllerRun
) -> None:
    total = 40
    dead = await controller_of.kill_after(f"@drip={total} @drip-ms=150 @chunks=0", deltas=8)
    consumed = [int(m[1]) for d in dead.deltas if (m := CHUNK.fullmatch(d))]
    assert consumed == list(range(1, 9)), dead.deltas
    assert dead.handle.prompt_id is not None and dead.handle.window_s == WINDOW_S
    host = await HostSession.find(dead.handle.relay_id)
    assert host.running(), "the agent did not outlive its controller"

    options = fast_options(scripted(), **OPTIONS)
    async with attach_session(dead.handle, options, settings(ssh_lab)) as session:
        assert session.info.obtained == "attached" and session.info.session_id == dead.handle.session_id
        log = TurnLog()
        with anyio.fail_after(60):
            async with session.resume_turn() as turn:
                async for event in turn:
                    log(event)
        assert turn.result is not None and turn.result.ok, turn.result
        assert turn.result.stop_reason == "end_turn"
        # From a whole line at or before what the dead controller had, every later chunk once, in order.
        assert log.chunks, log.text
        first = log.chunks[0]
        assert first <= consumed[-1] + 1, (first, consumed)
        assert log.chunks == list(range(first, total + 1)), log.chunks
        with pytest.raises(RuntimeError, match="no turn was in flight"):
            session.resume_turn()

        after = TurnLog()
        result = await session.run_turn("@chunks=2 after the takeover", after)
        assert result.ok and result.last_message == "after the takeover", result
        assert not after.chunks, f"the taken-over turn's output came again: {after.text}"
        assert "".join(after.text) == "after the takeover"
    await host.gone(within=15)
    assert controller_of.proc is not None and not alive(controller_of.proc.pid)


def blocked_in(pid: int) -> tuple[str, str]:
    """A process's state letter and where the kernel has it wait (``wchan``; some kernels say ``0``)."""
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state, Path(f"/proc/{pid}/wchan").read_text().strip()


async def watch_disk(host: HostSession, sizes: list[int], stop: anyio.Event) -> None:
    while not stop.is_set():
        sizes.append(host.disk_bytes())
        await anyio.sleep(0.05)


async def test_a_flood_while_nobody_is_attached_is_held_on_the_host_within_its_bound_and_all_delivered(
    ssh_lab: SshLab, controller_of: ControllerRun
) -> None:
    total = 120_000  # 182 bytes each: about 21 MiB, well past the 8 MiB the host keeps
    dead = await controller_of.kill_after(f"@drip=1 @sleep=2 @bulk={total}", deltas=1)
    host = await HostSession.find(dead.handle.relay_id)
    sizes: list[int] = []
    # The agent floods with nobody attached until the host's bound stops it: the directory stops
    # growing, while the agent is alive and not done.
    with anyio.fail_after(30):
        while len(sizes) < 30 or sizes[-1] < 7 << 20 or max(sizes[-30:]) != min(sizes[-30:]):
            sizes.append(host.disk_bytes())
            await anyio.sleep(0.05)
    assert host.running() and alive(host.agent), "the flood killed the agent"
    assert not (host.directory / "rc").exists(), "the agent finished: the flood was not held"
    state, wchan = blocked_in(host.agent)
    assert state == "S" and (wchan in ("", "0") or "pipe_write" in wchan), (state, wchan)

    options = fast_options(scripted(), **OPTIONS)
    stop = anyio.Event()
    async with attach_session(dead.handle, options, settings(ssh_lab)) as session, anyio.create_task_group() as tg:
        tg.start_soon(watch_disk, host, sizes, stop)
        log = TurnLog()
        with anyio.fail_after(60):
            async with session.resume_turn() as turn:
                async for event in turn:
                    log(event)
        stop.set()
        assert turn.result is not None and turn.result.ok, turn.result
    assert "".join(t for t in log.text if not CHUNK.fullmatch(t)) == "x" * total
    assert max(sizes) < 10 << 20, f"the session's directory grew to {max(sizes)} bytes"
    await host.gone(within=15)
