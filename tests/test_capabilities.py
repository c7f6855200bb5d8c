"""The capability record, as data and through real sessions."""

from __future__ import annotations

import logging

import pytest

from remote_acp import Event, Notification, open_session
from remote_acp.session.capabilities import Capability, CapabilityRecord, CapabilityState
from tests.support.agents import fast_options, give_up_on_turn, scripted, wait_until

NOTICE = "this session started with a declared capability gap in: "


def test_initial_states_local_and_remote() -> None:
    local = CapabilityRecord(remote=False)
    assert local.snapshot() == {
        "tool servers": "protocol",
        "token counts": "gap",
        "session continuation": "protocol",
        "agent version": "protocol",
    }
    remote = CapabilityRecord(remote=True)
    assert remote.state(Capability.TOOL_SERVERS) is CapabilityState.GAP
    measured = CapabilityRecord(remote=False, measured=True)
    assert measured.state(Capability.TOKEN_COUNTS) is CapabilityState.OURS
    assert measured.take_notice() is None  # no gap, no notice


def test_entries_only_lower_and_the_notice_keeps_the_fixed_order() -> None:
    record = CapabilityRecord(remote=True)
    record.lower(Capability.AGENT_VERSION, "no agentInfo")
    record.lower(Capability.SESSION_CONTINUATION, "neither load nor resume")
    record.lower(Capability.AGENT_VERSION, "again")  # already a gap: nothing changes
    assert record.gaps() == ["tool servers", "token counts", "session continuation", "agent version"]
    assert record.take_notice() == NOTICE + "tool servers, token counts, session continuation, agent version"
    assert record.take_notice() is None  # once per session


def test_lowering_after_the_notice_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    record = CapabilityRecord(remote=False)
    record.lower(Capability.AGENT_VERSION, "before")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert record.take_notice() == NOTICE + "token counts, agent version"
    record.lower(Capability.SESSION_CONTINUATION, "a load was not confirmed")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [(r.getMessage(), r.__dict__["capability"]) for r in warnings] == [
        ("capability lowered after the once-per-session notice", "session continuation")
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("args", "gaps"),
    [
        ((), "token counts, session continuation"),
        (("--advertise", "load"), "token counts"),
        (("--advertise", "resume"), "token counts"),
        (("--advertise", "load", "--no-agent-info"), "token counts, agent version"),
    ],
)
async def test_first_turn_names_the_gaps_once(workspace: str, args: tuple[str, ...], gaps: str) -> None:
    async with open_session(workspace, fast_options(scripted(*args))) as s:
        first: list[Event] = []
        await s.run_turn("one", first.append)
        second: list[Event] = []
        await s.run_turn("two", second.append)
    assert isinstance(first[1], Notification) and first[1].message == NOTICE + gaps
    assert not any(isinstance(e, Notification) and e.message.startswith(NOTICE) for e in second)


@pytest.mark.anyio
async def test_events_queued_for_a_turn_that_never_starts_are_dropped_with_a_count(
    workspace: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with open_session(workspace, fast_options(scripted(), read_timeout_ms=200)) as s:
        await give_up_on_turn(s, "@sleep=0.3 @ignore-cancel @chunks=3 late words here")
        await wait_until(lambda: len(s._inbox.between.events) >= 3)  # they arrive between turns; no turn follows
    records = [r for r in caplog.records if r.getMessage() == "dropping events queued for a turn that never started"]
    assert len(records) == 1 and records[0].levelno == logging.WARNING
    assert records[0].__dict__["count"] == 3
