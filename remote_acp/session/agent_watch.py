"""The agent end's own tasks, run beside its connection's: its stderr kept, its exit watched, and
its output released once it exited (see :mod:`remote_acp.session.connection`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from ..logs import get_logger

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ..targets.agent_end import AgentEnd
    from .connection import AgentConnection

__all__ = ["watch_agent"]

log = get_logger("remote_acp.session.connection")


def watch_agent(
    conn: AgentConnection, process: AgentEnd, *, output_drain_ms: int
) -> tuple[tuple[Callable[[], Awaitable[None]], str], ...]:
    """The agent process's tasks, run beside ``conn``'s (:meth:`AgentConnection.start`): its
    stderr kept, its exit watched, and its output released ``output_drain_ms`` after it exited."""
    drain_s = output_drain_ms / 1000

    async def release_output() -> None:
        await process.exited.wait()
        with anyio.move_on_after(drain_s):
            await process.stdout_eof.wait()
            return
        if conn.closing or conn.lost.is_set():
            return
        log.warning(
            "agent stdout was not fully collected before the session ended",
            extra={"drain_bound": f"{drain_s:g}s", "pid": process.pid},
        )
        conn.output_abandoned = True
        process.close_stdout()

    return (
        (process.drain_stderr, "stderr"),
        (process.watch_exit, "exit watch"),
        (release_output, "output release"),
    )
