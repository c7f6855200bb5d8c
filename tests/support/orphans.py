"""The suite's own orphan check: no process a test started may outlive it.

Every test runs with a unique marker in the environment. Local launches inherit the full
environment, so every process a test starts (and every descendant, even one that called
``setsid`` or was reparented to init) carries the marker in ``/proc/PID/environ``. After the
test, any live process (zombies count as dead) still carrying it is an orphan: it is killed and
the test fails.

A process that scrubbed its environment carries no marker. For those the test process is a
child subreaper (Linux): an orphan is reparented to it instead of to init, so any child that
appears during a test and is still alive after it is an orphan too (see :func:`become_subreaper`
and :func:`new_children`).
"""

from __future__ import annotations

import os
import signal
import time

from tests.support.processes import alive, cmdline, marked

__all__ = [
    "MARKER_NAME",
    "alive",
    "become_subreaper",
    "children",
    "find_marked",
    "kill_marked",
    "live_children",
    "settle_children",
]

MARKER_NAME = "REMOTE_ACP_TEST_MARK"


def find_marked(marker: str) -> list[int]:
    """The live processes (other than this one) carrying the test's ``marker``."""
    return marked(f"{MARKER_NAME}={marker}")


def kill_marked(marker: str, settle_s: float = 6.0) -> list[str]:
    """Wait up to ``settle_s`` for marked processes to go; kill and describe any that stay."""
    deadline = time.monotonic() + settle_s
    while (pids := find_marked(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    described = []
    for pid in pids:
        described.append(f"{pid}: {_cmdline(pid)}")
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return described


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants; whether that is in force."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(36, 1, 0, 0, 0) == 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def children() -> set[int]:
    """This process's children (live or zombie), from every thread's list."""
    me = os.getpid()
    found: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{me}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{me}/task/{tid}/children", "rb") as f:
                found.update(int(word) for word in f.read().split())
        except OSError:
            pass
    return found


def live_children() -> set[int]:
    """This process's live children, after reaping the dead ones.

    An orphan that died between tests would otherwise stay a zombie for good. Reaping a dead
    child that a fixture's ``Popen`` owns only costs that object its exit status (it reads 0).
    """
    found = set()
    for pid in children():
        if alive(pid):
            found.add(pid)
        else:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
    return found


def settle_children(before: set[int], settle_s: float = 6.0) -> list[str]:
    """Children that appeared since ``before`` (orphans reparented to us among them): reap the
    dead, wait up to ``settle_s`` for the live to go, then kill and describe any that stay.

    Only new children are reaped here, so a fixture's own process keeps its exit status.
    """
    deadline = time.monotonic() + settle_s
    while True:
        live = []
        for pid in children() - before:
            if alive(pid):
                live.append(pid)
            else:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
        if not live or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    described = []
    for pid in live:
        described.append(f"{pid}: {_cmdline(pid)}")
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass
    return described


def _cmdline(pid: int) -> str:
    return cmdline(pid).replace(b"\0", b" ").decode(errors="replace").strip()[:200] or "?"
