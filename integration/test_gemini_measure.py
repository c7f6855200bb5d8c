"""Token accounting with the real runtime: gemini-cli 0.61.0 offline against the Gemini API mock.

The mock answers every call with ``usageMetadata`` the test chose; gemini-cli copies it into its
local telemetry, which the session's measurement source reads. Each gemini start costs about 4 s
and its telemetry is written in 5 s batches, so the cases share starts where they can: one session
runs a cancelled turn and then two measured ones.

Every test points :mod:`tempfile` at a directory of its own, to see that the source's private
directories are gone once the session is.
"""

from __future__ import annotations

import logging
import os
import stat
import tempfile
from typing import TYPE_CHECKING

import anyio
import pytest

from integration.gemini_fixtures import gemini_installed, gemini_mock, gemini_options, gemini_target
from remote_acp import Event, Notification, TokenUsage, TurnCancelled, TurnCompleted, open_session
from remote_acp.events import TokenLowerBound
from remote_acp.session.capabilities import NOTICE_PREFIX
from remote_acp.targets.ssh.settings import SshSettings
from remote_acp.targets.ssh.target import SshTarget
from tests.support.agents import wait_until
from tests.support.gemini import gemini_command, gemini_env
from tests.support.gemini_mock import GeminiMock, Usage

if TYPE_CHECKING:
    from pathlib import Path

    from integration.sshlab import SshLab

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("gemini_installed")]
__all__ = ["gemini_installed", "gemini_mock"]  # fixtures, registered by importing them


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the measurement source's temporary directories go for this test."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def expected(router: Usage, *mains: Usage, routers: int = 1) -> tuple[int, int, int, int]:
    """(input, output, cache_read, total) of one turn: every call counts, the classifier's too."""
    calls = [*[router] * routers, *mains]
    return (
        sum(u.prompt + u.tool for u in calls),
        sum(u.candidates + u.thoughts for u in calls),
        sum(u.cached for u in calls),
        sum(u.metadata()["totalTokenCount"] for u in calls),
    )


def figures(events: list[Event]) -> list[tuple[int, int, int, int]]:
    return [
        (e.input_tokens, e.output_tokens, e.cache_read_tokens, e.total_tokens)
        for e in events
        if isinstance(e, TokenUsage)
    ]


async def test_figures_match_the_runtime_records_and_a_cancelled_turn_keeps_the_source(
    tmp_path: Path, gemini_mock: GeminiMock, private_tmp: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    mock = gemini_mock
    mock.router_usage = Usage(prompt=30, candidates=5, total=35)
    second = Usage(prompt=1234, candidates=56, cached=200, thoughts=7, tool=9, total=1306)
    third = Usage(prompt=2000, candidates=70, cached=10, thoughts=3, total=99999)  # a total passed through
    mock.usage.extend([second, third])
    async with open_session(str(workspace), gemini_options(), gemini_target(tmp_path / "home", mock)) as session:
        assert session.measured and session.info.measured
        [armed] = os.listdir(private_tmp)
        assert stat.S_IMODE(os.stat(private_tmp / armed).st_mode) == 0o700

        # Turn 1 is cancelled while its model call is held: no figure, and the source stays.
        events: list[Event] = []
        async with session.turn(f"first {mock.hold_word}") as turn:
            async for event in turn:
                events.append(event)
                if len(events) == 1:
                    await wait_until(lambda: bool(mock.calls("main")), within=30)
                    turn.cancel()
        mock.release()
        assert isinstance(events[-1], TurnCancelled)
        assert not [e for e in events if isinstance(e, (TokenUsage, TokenLowerBound))]
        assert session.measured

        # Turns 2 and 3: one token_usage each, before the terminal event, exactly the records'.
        # The cancelled turn's classifier call was written after its turn: it counts in turn 2.
        turn_events: list[list[Event]] = []
        for prompt in ("second", "third"):
            events = []
            result = await session.run_turn(prompt, events.append)
            assert result.ok, result
            turn_events.append(events)
        assert figures(turn_events[0]) == [expected(mock.router_usage, second, routers=2)]
        assert figures(turn_events[1]) == [expected(mock.router_usage, third)]
        for events in turn_events:
            kinds = [type(e) for e in events]
            assert kinds[-2:] == [TokenUsage, TurnCompleted]
            usage = events[-2]
            assert isinstance(usage, TokenUsage) and usage.model == mock.calls("main")[-1].model
            assert usage.session_id == session.session_id
        # The vendor's own figure is a lower bound, main call only, never the spend.
        bounds = [e for e in turn_events[1] if isinstance(e, TokenLowerBound)]
        assert [(b.input_tokens, b.output_tokens, b.source) for b in bounds] == [
            (third.prompt, third.candidates, "_meta.quota.token_count")
        ]
        assert session.measured
    assert os.listdir(private_tmp) == []


async def test_a_wrapper_that_does_not_name_the_runtime_settles_by_restarting(
    tmp_path: Path, gemini_mock: GeminiMock, private_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No claim on the first start; its handshake says gemini-cli; the second start carries the
    source and is confirmed. The wrapper runs once per start; the restart is logged once."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    starts = tmp_path / "starts"
    wrapper = tmp_path / "run-agent.sh"
    wrapper.write_text(f'#!/bin/sh\necho "$$" >> {starts}\nexec {gemini_command(model="gemini-2.5-flash")[0]} "$@"\n')
    wrapper.chmod(0o755)
    usage = Usage(prompt=321, candidates=12, cached=4, thoughts=2)
    gemini_mock.usage.append(usage)
    options = gemini_options([str(wrapper), "--acp", "--skip-trust", "--model", "gemini-2.5-flash"])
    caplog.set_level(logging.INFO, logger="remote_acp")
    async with open_session(str(workspace), options, gemini_target(tmp_path / "home", gemini_mock)) as session:
        assert session.measured
        events: list[Event] = []
        assert (await session.run_turn("hi", events.append)).ok
        pids = starts.read_text().split()
        assert len(pids) == 2 and session.pid == int(pids[-1])
    restarts = [r for r in caplog.records if r.getMessage() == "restarting the agent to settle the measurement source"]
    assert [getattr(r, "agent_name", None) for r in restarts] == ["gemini-cli"]
    assert figures(events) == [(321, 14, 4, 335)]  # a pinned model: no classifier call
    assert os.listdir(private_tmp) == []


async def test_a_source_that_never_writes_is_dropped_with_a_warning(
    tmp_path: Path, gemini_mock: GeminiMock, private_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The command names gemini (claimed, confirmed) but turns its telemetry off: the first turn's
    wait runs the source's whole window and finds nothing, so the source is dropped."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    command = ["env", "GEMINI_TELEMETRY_ENABLED=false", *gemini_command(model="gemini-2.5-flash")]
    caplog.set_level(logging.INFO, logger="remote_acp")
    async with open_session(
        str(workspace), gemini_options(command), gemini_target(tmp_path / "home", gemini_mock)
    ) as session:
        assert session.measured
        events: list[Event] = []
        assert (await session.run_turn("hi", events.append)).ok
        notices = [e.message for e in events if isinstance(e, Notification) and e.message.startswith(NOTICE_PREFIX)]
        assert notices == []  # the first turn had no gap to name: it started measured
        assert figures(events) == []
        assert not session.measured and not session.info.measured
        assert session.capabilities.snapshot()["token counts"] == "gap"
        warnings = [
            r for r in caplog.records if r.levelno == logging.WARNING and "capability lowered" in r.getMessage()
        ]
        assert [getattr(r, "capability", None) for r in warnings] == ["token counts"]
        # A later turn neither waits nor reports a figure.
        events = []
        with anyio.fail_after(30):
            assert (await session.run_turn("again", events.append)).ok
        assert figures(events) == []
    assert os.listdir(private_tmp) == []


async def test_a_remote_launch_makes_no_claim_and_is_not_measured(
    tmp_path: Path,
    gemini_mock: GeminiMock,
    private_tmp: Path,
    ssh_lab: SshLab,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """gemini behind a real sshd on this machine: the command names it, but the remote rule
    withholds the claim. No temporary directory, no telemetry variable, no figure."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = gemini_env(tmp_path / "home", gemini_mock)
    carried = ("HOME", "GEMINI_CLI_HOME", "GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL", "NO_PROXY", "no_proxy")
    for name in carried:
        monkeypatch.setenv(name, env[name])
    target = SshTarget("lab1", SshSettings(config_file=str(ssh_lab.config), pass_env=carried))
    caplog.set_level(logging.INFO, logger="remote_acp")
    async with open_session(
        str(workspace), gemini_options(gemini_command(model="gemini-2.5-flash")), target
    ) as session:
        assert not session.measured and not session.info.measured
        assert os.listdir(private_tmp) == []
        events: list[Event] = []
        assert (await session.run_turn("hi", events.append)).ok
        assert not [e for e in events if isinstance(e, TokenUsage)]
        notices = [e.message for e in events if isinstance(e, Notification) and e.message.startswith(NOTICE_PREFIX)]
        assert notices and "token counts" in notices[0]
        # The vendor's figure still says a figure exists, as a lower bound only.
        assert [type(e) for e in events][-2:] == [TokenLowerBound, TurnCompleted]
    said = [r for r in caplog.records if r.getMessage() == "token counts not measured"]
    assert len(said) == 1 and "remote" in getattr(said[0], "reason", "")
    assert not any("GEMINI_TELEMETRY" in key for key in os.environ)
