"""Commands and options for the agents the tests launch."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from remote_acp import Session, SessionOptions, TurnResult

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["SDK_AGENT", "fast_options", "give_up_on_turn", "scripted", "sdk_agent", "wait_until"]

SDK_AGENT = Path(__file__).resolve().parents[1] / "agents" / "sdk_agent.py"


def scripted(*args: str) -> list[str]:
    """The scriptable agent shipped in the package, with start-level options."""
    return [sys.executable, "-m", "remote_acp.testing.scripted_agent", *args]


def sdk_agent(*args: str) -> list[str]:
    """The agent written on the official SDK's agent side."""
    return [sys.executable, str(SDK_AGENT), *args]


def fast_options(command: list[str] | str, **overrides: Any) -> SessionOptions:
    """Options with bounds short enough for tests (every bound is configurable)."""
    values: dict[str, Any] = {
        "command": command,
        "read_timeout_ms": 2_000,
        "initialize_floor_ms": 30_000,  # start-up under load can be slow; tests of the bound set their own
        "turn_timeout_ms": 20_000,
        "stall_timeout_ms": 20_000,
        "stop_grace_ms": 1_000,
        "output_drain_ms": 1_000,
    }
    values.update(overrides)
    return SessionOptions(**values)


async def give_up_on_turn(session: Session, prompt: str) -> TurnResult:
    """Start a turn and cancel it at once; it settles within ``read_timeout_ms``. With an agent that
    ignores the cancel, whatever it sends afterwards arrives between turns."""
    async with session.turn(prompt) as turn:
        turn.cancel()
        async for _ in turn:
            pass
    assert turn.result is not None
    return turn.result


async def wait_until(condition: Callable[[], bool], *, within: float = 10.0) -> None:
    """Wait until ``condition()`` holds (something observable), failing after ``within`` seconds."""
    with anyio.fail_after(within):
        while not condition():  # noqa: ASYNC110  # what is observed has no event of its own
            await anyio.sleep(0.01)
