"""Worker of the memory benchmark: a client process holding N idle sessions, reporting its RSS.

    python -m benchmarks._hold N AGENT_ARGV...

It imports only what a program embedding the library would (the library, anyio; before that,
only the benchmarks' ``/proc`` reader), opens N sessions on the agent given (the scriptable
agent) one after another, runs one one-chunk turn on each, and, with every session open and idle,
prints one JSON object: ``rss_kib`` / ``hwm_kib`` (VmRSS / VmHWM of this process; the agents are
other processes and are not counted), ``start_kib`` (before the library was imported) and
``imported_kib`` (after). Then it closes every session.
"""

from __future__ import annotations

from ._proc import status_kib


def _rss() -> dict[str, int]:
    """VmRSS and VmHWM of this process, as ``rss_kib`` and ``hwm_kib``."""
    return {f"{key[2:].lower()}_kib": kib for key, kib in status_kib("self", "VmRSS", "VmHWM").items()}


START = _rss()["rss_kib"]

import gc  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from contextlib import AsyncExitStack  # noqa: E402
from typing import TYPE_CHECKING  # noqa: E402

import anyio  # noqa: E402

from remote_acp import SessionOptions, open_session  # noqa: E402

if TYPE_CHECKING:
    from remote_acp.session.core import Session

IMPORTED = _rss()["rss_kib"]


async def hold(count: int, agent: list[str]) -> dict[str, int]:
    options = SessionOptions(command=agent)
    async with AsyncExitStack() as stack:
        sessions: list[Session] = [
            await stack.enter_async_context(open_session(os.getcwd(), options)) for _ in range(count)
        ]
        for session in sessions:
            result = await session.run_turn("hi")
            if result.outcome != "turn_completed":
                raise RuntimeError(f"turn ended {result.outcome}")
        gc.collect()
        await anyio.sleep(0.05)
        return {"sessions": len(sessions), "start_kib": START, "imported_kib": IMPORTED, **_rss()}


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit("usage: python -m benchmarks._hold N AGENT_ARGV...")
    count, agent = int(sys.argv[1]), sys.argv[2:]
    print(json.dumps(anyio.run(hold, count, agent)))


if __name__ == "__main__":
    main()
