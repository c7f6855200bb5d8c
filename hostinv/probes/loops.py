"""asyncssh's loop under any anyio backend: on asyncio the caller's, elsewhere (trio) one of its own.

asyncssh runs on asyncio only. :func:`on_own_loop` runs a coroutine on a fresh asyncio loop in
a worker thread; a cancelled caller cancels it there and waits for it to unwind (asyncssh closes
its connection, a child process is killed and reaped), so no thread or process outlives the call.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

__all__ = ["on_asyncio", "on_own_loop"]

_T = TypeVar("_T")


def on_asyncio() -> bool:
    """Whether the caller runs on an asyncio loop (else on trio, through anyio)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def on_own_loop(make: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """``make()`` run to its end on an asyncio loop of its own in a worker thread.

    A cancelled caller cancels it there and waits for it to unwind (asyncssh closes its
    connection, an ``ssh -G`` is killed), so no thread or process outlives the call.
    """
    import anyio  # here: only a caller off asyncio (trio) comes this way

    lock = threading.Lock()
    running: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = []
    stopped = False

    def stop() -> None:
        nonlocal stopped
        with lock:
            stopped = True
            for loop, task in running:
                loop.call_soon_threadsafe(task.cancel)

    async def main() -> _T:
        task = asyncio.current_task()
        assert task is not None
        with lock:
            if stopped:
                raise asyncio.CancelledError
            running.append((asyncio.get_running_loop(), task))
        return await make()

    outcome: list[_T] = []
    failure: list[BaseException] = []
    done = anyio.Event()

    async def worker() -> None:
        try:  # not abandoned on cancel: the caller waits for the thread (below)
            outcome.append(await anyio.to_thread.run_sync(asyncio.run, main()))
        except BaseException as exc:  # handed to the caller below
            failure.append(exc)
        finally:
            done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(worker)
        try:
            await done.wait()
        except anyio.get_cancelled_exc_class():
            stop()
            with anyio.CancelScope(shield=True):
                await done.wait()
            raise
    if failure:
        raise failure[0]
    return outcome[0]
