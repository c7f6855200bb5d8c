"""A turn on a host with a reattach window outlives its links: its local ssh killed twice and its
network link cut for ten seconds, the caller gets every chunk of a turn that streams for about
twenty seconds exactly once and in order, a ``link_lost``/``link_restored`` pair per loss, and
the turn's end; the time without a link does not count against the turn's stall bound. Closed,
the session leaves nothing on the host. A link down for longer than the window ends the turn
(``link_lost``), and the host lets the session go while the link is still down."""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING

import anyio
import pytest

from integration.users import agent_pythonpath, throwaway_user
from remote_acp import LinkRestored, open_session
from remote_acp.targets.ssh.settings import SshSettings
from remote_acp.targets.ssh.target import SshTarget
from tests.support.agents import fast_options, scripted
from tests.support.processes import alive, gone_within
from tests.support.reattach_host import HostSession, TurnLog, assert_refused, kill_link_ssh, user_agent

if TYPE_CHECKING:
    from pathlib import Path

    from integration.sshlab import SshLab

pytestmark = pytest.mark.anyio

CUT_S = 10


async def test_a_streaming_turn_survives_two_killed_ssh_and_a_cut_link_with_every_chunk_once_in_order(
    ssh_lab: SshLab, homes: Path
) -> None:
    lab = ssh_lab.namespaced
    total = 100  # one every 200 ms: about 20 s
    with throwaway_user(ssh_lab.client_key.with_suffix(".pub"), base=homes) as user:
        command, environ = user_agent(agent_pythonpath())
        settings = SshSettings(
            config_file=str(ssh_lab.config),
            reattach_window_s=30,
            capacity=1,
            pass_env=("PYTHONPATH",),
            server_alive_interval_s=1,  # ssh notices the cut within about 3 s
            server_alive_count_max=2,
            connect_timeout_s=3,
        )
        target = SshTarget(user.destination(lab.alias), settings, environ=environ)
        # The stall bound is shorter than the cut: only the time with a link counts.
        options = fast_options(
            command, read_timeout_ms=10_000, initialize_floor_ms=20_000, turn_timeout_ms=90_000, stall_timeout_ms=8_000
        )
        log = TurnLog()
        killed: list[int] = []

        async def disturb() -> None:
            await log.until(10, within=20)
            killed.append(await kill_link_ssh())
            await log.until_restored(1, within=20)
            await log.until(30, within=20)
            killed.append(await kill_link_ssh())
            await log.until_restored(2, within=20)
            await log.until(45, within=20)
            lab.cut_link()
            try:
                await anyio.sleep(CUT_S)
            finally:
                lab.restore_link()

        async with open_session(str(user.home), options, target=target) as session:
            assert session.handle is not None
            host = await HostSession.find(session.handle.relay_id)
            assert host.slot is not None and not host.slot_free(), "the session holds no slot"
            with anyio.fail_after(75):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(disturb)
                    result = await session.run_turn(f"@drip={total} @drip-ms=200 @chunks=0", log)
            assert result.ok and result.stop_reason == "end_turn", result
            assert log.chunks == list(range(1, total + 1)), log.chunks
            assert log.link_events == ["link_lost", "link_restored"] * 3, log.link_events
            cut = [event for event in log.events if isinstance(event, LinkRestored)][2]
            assert cut.down_ms >= (CUT_S - 5) * 1000, cut  # the cut, less the time ssh took to notice
            assert len(set(killed)) == 2 and await gone_within(killed, 5)
            after = await session.run_turn("@chunks=2 and after")
            assert after.ok and after.last_message == "and after", after
        await host.gone(within=15)


async def test_a_link_down_past_the_window_ends_the_turn_link_lost_and_the_host_lets_the_session_go_meanwhile(
    ssh_lab: SshLab,
) -> None:
    lab, window, log = ssh_lab.namespaced, 3, TurnLog()
    settings = SshSettings(
        config_file=str(ssh_lab.config),
        reattach_window_s=window,
        server_alive_interval_s=1,
        server_alive_count_max=2,
        connect_timeout_s=2,
    )
    options = fast_options(scripted(), read_timeout_ms=10_000, turn_timeout_ms=60_000, stall_timeout_ms=30_000)

    async def cut() -> None:
        await log.until(5, within=20)
        lab.cut_link()

    try:
        async with open_session("/tmp", options, target=SshTarget(lab.alias, settings)) as session:
            assert session.handle is not None
            host = await HostSession.find(session.handle.relay_id)
            with anyio.fail_after(40):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(cut)
                    result = await session.run_turn("@drip=1000 @drip-ms=100 @chunks=0", log)
        assert result.outcome == "turn_failed" and result.error is not None, result
        assert_refused(
            result.error, "link_lost", f"the link to {lab.alias} stayed down for the whole reattach window ({window} s)"
        )
        assert result.error.retryable and result.error.facts.host == lab.alias
        assert log.link_events == ["link_lost"], log.link_events
        assert log.chunks == list(range(1, len(log.chunks) + 1)), log.chunks
        # The link still cut, the host's end of the dead connection (which the host's sshd may take
        # long to notice while the agent writes) is let go of, and nobody attaches for the window.
        await host.gone(within=window + 20)
    finally:
        lab.restore_link()


async def test_a_reconnect_that_must_first_end_a_stale_attachment_on_the_host_goes_on(ssh_lab: SshLab) -> None:
    """The host may still count the lost connection as attached (a half-open link its sshd has not
    noticed): the reconnect's attach step then ends it first (its takeover), and answers later than
    usual. Stood in for by stopping the attached connection's processes on the host (SIGSTOP) before
    the local ssh is killed: the takeover ends them, and the turn must go on."""
    window = 8
    settings = SshSettings(config_file=str(ssh_lab.config), reattach_window_s=window)
    options = fast_options(scripted(), read_timeout_ms=10_000, turn_timeout_ms=60_000, stall_timeout_ms=30_000)
    log = TurnLog()
    stopped: list[int] = []

    async def go_stale() -> None:
        await log.until(3, within=20)
        stopped.extend(host.attachments())
        assert stopped, "no connection attached on the host"
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        await kill_link_ssh()

    async with open_session("/tmp", options, target=SshTarget("lab1", settings)) as session:
        assert session.handle is not None
        host = await HostSession.find(session.handle.relay_id)
        try:
            with anyio.fail_after(40):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(go_stale)
                    result = await session.run_turn("@drip=20 @drip-ms=200 @chunks=0", log)
        finally:
            for pid in stopped:
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
    # (what a failed turn leaves on the host goes with the window, before anything is asserted)
    await host.gone(within=window + 15)
    assert not [pid for pid in stopped if alive(pid)]
    assert result.ok, result
    assert log.chunks == list(range(1, 21)), log.chunks
    assert log.link_events == ["link_lost", "link_restored"], log.link_events
