"""What a session with a reattach window refuses, and when its host lets it go: a detached
session nobody takes over is ended when its window runs out (its processes, directory and slot
gone), after which an attach is ``session_expired``; a second controller is refused while one is
attached (``attached_elsewhere``), a wrong secret is ``not_owner``, and another local user cannot
even reach the session (its logins look in its own private directory: ``session_expired``). Each
refusal leaves the session as it was, for its owner."""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING

import anyio
import pytest

from integration.users import agent_pythonpath, throwaway_user
from remote_acp import RemoteAcpError, SessionHandle, attach_session, open_session
from remote_acp.targets.ssh.settings import SshSettings
from remote_acp.targets.ssh.target import SshTarget
from tests.support.agents import fast_options, scripted
from tests.support.reattach_host import HostSession, TurnLog, assert_refused, user_agent

if TYPE_CHECKING:
    from pathlib import Path

    from integration.sshlab import SshLab

pytestmark = pytest.mark.anyio

BOUNDS = {"read_timeout_ms": 10_000, "initialize_floor_ms": 20_000}


def attach_settings(settings: SshSettings) -> SshSettings:
    """The settings a session started with, for an attach from a process that lacks the values it
    carried (an attach carries none: see the test of that below)."""
    return dataclasses.replace(settings, pass_env=())


async def refusal(handle: SessionHandle, settings: SshSettings, command: list[str]) -> RemoteAcpError:
    """The error an attach to ``handle`` fails with (bounded)."""
    with anyio.fail_after(30), pytest.raises(RemoteAcpError) as caught:
        async with attach_session(handle, fast_options(command, **BOUNDS), settings):
            pass
    return caught.value


async def test_a_detached_session_nobody_takes_over_ends_with_its_window_and_then_cannot_be_attached(
    ssh_lab: SshLab, homes: Path
) -> None:
    window = 3
    with throwaway_user(ssh_lab.client_key.with_suffix(".pub"), base=homes) as user:
        command, environ = user_agent(agent_pythonpath())
        settings = SshSettings(
            config_file=str(ssh_lab.config), reattach_window_s=window, capacity=1, pass_env=("PYTHONPATH",)
        )
        target = SshTarget(user.destination("lab1"), settings, environ=environ)
        async with open_session(str(user.home), fast_options(command, **BOUNDS), target=target) as session:
            assert (await session.run_turn("before the detach")).ok
            assert session.handle is not None
            host = await HostSession.find(session.handle.relay_id)
            assert host.slot is not None and not host.slot_free(), "the session holds no slot"
            handle = await session.detach()
        assert handle.detached_at is not None and handle.prompt_id is None
        left = handle.seconds_left()
        assert left is not None and 0 < left <= window
        # Detached, it runs on: the agent, the directory and the slot.
        assert host.running() and not host.slot_free()
        await host.gone(within=window + 8)

        error = await refusal(handle, attach_settings(settings), command)
        assert_refused(error, "session_expired", "the detached session is gone (its window expired, or it ended)")
        assert not error.retryable and error.facts.host == user.destination("lab1")
        assert "no such session" in error.detail, error.detail
        assert "start a new session" in error.fix


async def test_a_second_controller_a_wrong_secret_and_another_user_are_refused_and_the_owner_is_not(
    ssh_lab: SshLab, homes: Path
) -> None:
    settings = SshSettings(config_file=str(ssh_lab.config), reattach_window_s=30)
    command = scripted()
    options = fast_options(command, **BOUNDS)
    async with open_session("/tmp", options, target=SshTarget("lab1", settings)) as session:
        assert (await session.run_turn("@chunks=3 the first turn's words")).ok
        handle = session.handle
        assert handle is not None
        host = await HostSession.find(handle.relay_id)

        error = await refusal(handle, settings, command)
        assert_refused(error, "attached_elsewhere", "the session is attached to another controller")
        assert error.retryable and "take it over with its handle" in error.fix
        # The controller that holds it did not notice.
        result = await session.run_turn("@chunks=2 still mine")
        assert result.ok and result.last_message == "still mine", result
        handle = await session.detach()

    wrong = dataclasses.replace(handle, secret="not-the-secret-" + "x" * 16)
    error = await refusal(wrong, settings, command)
    assert_refused(error, "not_owner", "the session's secret does not match: it is not this controller's")
    assert not error.retryable and "wrong secret" in error.detail
    assert host.running()

    # Another local user, with the right secret: the session's directory is in root's private
    # slot directory, and that user's logins look in their own, where there is no such session.
    assert os.stat(host.directory).st_uid == 0 and os.stat(host.directory).st_mode & 0o777 == 0o700
    with throwaway_user(ssh_lab.client_key.with_suffix(".pub"), base=homes) as other:
        theirs = dataclasses.replace(handle, host=other.destination("lab1"))
        error = await refusal(theirs, settings, command)
        assert_refused(error, "session_expired", "the detached session is gone (its window expired, or it ended)")
    assert host.running()

    async with attach_session(handle, options, settings) as session:
        result = await session.run_turn("@chunks=2 the owner again")
        assert result.ok and result.last_message == "the owner again", result
    await host.gone(within=15)


async def test_a_session_taken_over_after_a_detach_gives_only_what_came_after_it(ssh_lab: SshLab) -> None:
    """A clean detach lets go of a session whose output its controller had, all of it: the next
    controller's first turn holds that turn's output only (each output byte once). Detached and
    taken over again, round after round."""
    settings = SshSettings(config_file=str(ssh_lab.config), reattach_window_s=30)
    options = fast_options(scripted(), **BOUNDS)
    async with open_session("/tmp", options, target=SshTarget("lab1", settings)) as session:
        assert (await session.run_turn("@chunks=3 before the first detach")).ok
        handle = await session.detach()
    host = await HostSession.find(handle.relay_id)
    seen: list[str] = []
    for round_ in range(1, 6):
        log = TurnLog()
        async with attach_session(handle, options, settings) as session:
            result = await session.run_turn(f"@chunks=2 round {round_}", log)
            assert result.ok and result.last_message == f"round {round_}", result
            seen.append("".join(log.text))
            if round_ < 5:
                handle = await session.detach()
    await host.gone(within=15)
    assert seen == [f"round {n}" for n in range(1, 6)], f"a detached controller's output came again: {seen}"


async def test_an_attach_with_the_settings_the_session_started_with_needs_none_of_the_values_it_carried(
    ssh_lab: SshLab,
) -> None:
    """An attach starts no agent and carries nothing: a ``pass_env`` naming a variable this process
    lacks must not stop it (here, of a session that is gone: the host's answer is the error)."""
    assert "RA_REATTACH_UNSET" not in os.environ
    settings = SshSettings(config_file=str(ssh_lab.config), reattach_window_s=30, pass_env=("RA_REATTACH_UNSET",))
    gone = SessionHandle(
        host="lab1", relay_id="0" * 24, secret="s" * 32, session_id="sess-1", workspace="/tmp", window_s=30
    )
    error = await refusal(gone, settings, scripted())
    assert_refused(error, "session_expired", "the detached session is gone (its window expired, or it ended)")


async def test_detach_is_refused_mid_turn_and_for_a_session_without_a_window(ssh_lab: SshLab) -> None:
    settings = SshSettings(config_file=str(ssh_lab.config), reattach_window_s=30)
    options = fast_options(scripted(), **BOUNDS)
    async with open_session("/tmp", options, target=SshTarget("lab1", settings)) as session:
        log = TurnLog()
        async with session.turn("@drip=3 @drip-ms=200 @chunks=0") as turn:
            with pytest.raises(RemoteAcpError) as caught:
                await session.detach()
            assert_refused(caught.value, "misuse", "a turn is in flight: detach between turns", kind="response_error")
            async for event in turn:
                log(event)
        assert turn.result is not None and turn.result.ok and log.chunks == [1, 2, 3], (turn.result, log.chunks)
        assert session.handle is not None
        host = await HostSession.find(session.handle.relay_id)
    await host.gone(within=15)

    async with open_session("/tmp", options) as local:
        assert local.handle is None
        with pytest.raises(RemoteAcpError) as caught:
            await local.detach()
        assert_refused(
            caught.value,
            "misuse",
            "only a started session on a host with a reattach window can be detached",
            kind="response_error",
        )
        assert (await local.run_turn("still usable")).ok
