"""A controller to kill: it starts a session with a reattach window over ssh and a turn, then
reports on stdout, one line each, what a test needs to take the session over once it is dead.

    python -m tests.support.reattach_controller CONFIG DESTINATION WINDOW_S PROMPT

Lines: ``handle JSON`` once the turn's prompt is on its way (the session's handle, which names
the prompt in flight), then ``delta TEXT`` (JSON-quoted) for each piece of the agent's text as the
turn delivers it, and ``done OUTCOME`` if the turn ends; then it waits, for its SIGKILL. The
agent is the scripted agent, started with this interpreter (the lab's root user runs it).
"""

from __future__ import annotations

import json
import sys

import anyio

from remote_acp import Notification, open_session
from remote_acp.targets.ssh.settings import SshSettings
from remote_acp.targets.ssh.target import SshTarget
from tests.support.agents import fast_options, scripted

__all__ = ["OPTIONS", "main"]

OPTIONS = {"read_timeout_ms": 10_000, "turn_timeout_ms": 120_000, "stall_timeout_ms": 60_000}
"""The bounds of the dead controller's session, and of the one that takes it over."""


def say(*words: str) -> None:
    sys.stdout.write(" ".join(words) + "\n")
    sys.stdout.flush()


async def run(config: str, destination: str, window_s: int, prompt: str) -> None:
    target = SshTarget(destination, SshSettings(config_file=config, reattach_window_s=window_s))
    async with open_session("/tmp", fast_options(scripted(), **OPTIONS), target=target) as session:
        async with session.turn(prompt) as turn:
            handle = session.handle
            assert handle is not None and handle.prompt_id is not None, handle
            say("handle", json.dumps(handle.to_json()))
            async for event in turn:
                if isinstance(event, Notification) and event.delta is not None:
                    say("delta", json.dumps(event.delta))
        say("done", turn.result.outcome if turn.result is not None else "?")
        await anyio.sleep(600)


def main() -> None:
    config, destination, window_s, prompt = sys.argv[1:5]
    anyio.run(run, config, destination, int(window_s), prompt)


if __name__ == "__main__":
    main()
