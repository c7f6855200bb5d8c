"""The scripted agent's ``@drip``: a turn that streams numbered chunks over time, and ends early
on a cancel."""

from __future__ import annotations

import re
import time

import anyio
import pytest

from remote_acp import Notification, open_session
from remote_acp.testing._script import Script, TurnPlan, build_plan
from tests.support.agents import fast_options, scripted

pytestmark = [pytest.mark.process, pytest.mark.anyio]

CHUNK = re.compile(r"chunk-(\d{4,}) ")


def plan(text: str) -> TurnPlan:
    return build_plan(Script.parse(text), Script((), ()))


def test_drip_parses_its_count_and_spacing() -> None:
    assert (plan("@drip=12 @drip-ms=250").drip, plan("@drip=12 @drip-ms=250").drip_ms) == (12, 250)
    assert (plan("hi").drip, plan("hi").drip_ms) == (0, 100)
    with pytest.raises(ValueError, match="bad directive @drip: expected a count >= 0"):
        plan("@drip=-1")
    with pytest.raises(ValueError, match="bad directive @drip-ms: needs a value"):
        plan("@drip-ms")


async def test_a_drip_streams_numbered_chunks_over_time_then_the_reply() -> None:
    deltas: list[tuple[float, str]] = []

    def keep(event: object) -> None:
        if isinstance(event, Notification) and event.delta is not None:
            deltas.append((time.monotonic(), event.delta))

    async with open_session("/tmp", fast_options(scripted())) as session:
        started = time.monotonic()
        result = await session.run_turn("@drip=5 @drip-ms=100 done", keep)
    assert result.ok, result
    assert [text for _, text in deltas] == [f"chunk-000{i} " for i in range(1, 6)] + ["done"]
    # the first at once, then one every 100 ms: a lower bound only (a loaded machine is slower)
    assert deltas[4][0] - started >= 0.4


async def test_a_cancel_ends_a_drip_between_two_chunks() -> None:
    seen: list[int] = []
    async with open_session("/tmp", fast_options(scripted())) as session:
        async with session.turn("@drip=1000 @drip-ms=50 @chunks=0") as turn:
            async for event in turn:
                if isinstance(event, Notification) and event.delta and (match := CHUNK.fullmatch(event.delta)):
                    seen.append(int(match[1]))
                    if len(seen) == 3:
                        turn.cancel()
        with anyio.fail_after(5):
            after = await session.run_turn("@chunks=1 next", lambda event: None)
    assert turn.result is not None and turn.result.outcome == "turn_cancelled", turn.result
    assert seen[:3] == [1, 2, 3] and len(seen) < 1000
    assert seen == list(range(1, len(seen) + 1))
    assert after.ok and after.last_message == "next"
