"""The benchmark process itself: set up on entry, accounted for on exit.

Every process a benchmark starts is accounted for: the benchmark process makes itself a child
subreaper (Linux), so any descendant orphaned by a contender is re-parented to it, and
:func:`sweep` reports and kills it. At the end the run's targets are printed (and saved for
``run_all``), and the line ``leftover processes after this benchmark`` is part of the result.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING

from ._proc import children
from ._programs import PY, ensure_bytecode

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ._report import Summary

__all__ = ["become_subreaper", "benchmark_process", "environment_note", "sweep"]

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """Orphaned descendants of our contenders get re-parented to us, so :func:`sweep` sees them."""
    if sys.platform != "linux":
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def sweep() -> list[int]:
    """Reap zombies re-parented to us; SIGKILL and report every live child still there."""
    leftovers: list[int] = []
    for pid, state in children():
        if state != "Z":
            leftovers.append(pid)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, 0)
    return leftovers


def environment_note() -> str:
    """One line describing where the numbers come from."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return (
        f"python {sys.version.split()[0]} ({PY}); {os.cpu_count()} CPUs; "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )


def _terminated(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def benchmark_process(summary: Summary, summary_file: str | None) -> Iterator[None]:
    """Subreaper on entry; on exit sweep leftovers, print and save the summary. A SIGTERM
    unwinds like an interrupt, so the labs, throwaway users and agents go with the run."""
    become_subreaper()
    signal.signal(signal.SIGTERM, _terminated)
    # The library's expected warnings (e.g. a force-terminated stubborn agent) would interleave
    # with the tables; a handler that drops them keeps logging's last-resort printer quiet.
    logging.getLogger("remote_acp").addHandler(logging.NullHandler())
    print(environment_note())
    print(ensure_bytecode(), flush=True)
    try:
        yield
    finally:
        from remote_acp import close_launcher

        close_launcher()  # the in-process sessions' launcher: ours, not a leftover
        summary.leftovers = sweep()
        summary.print()
        summary.save(summary_file)
