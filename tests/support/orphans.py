"""The suite's own orphan check: no process a test started may outlive it.

Every test runs with a unique marker in the environment. Local launches inherit the full
environment, so every process a test starts (and every descendant, even one that called
``setsid`` or was reparented to init) carries the marker in ``/proc/PID/environ``. After the
test, any live process (zombies count as dead) still carrying it is an orphan: it is killed and
the test fails.
"""

from __future__ import annotations

import os
import signal
import time

__all__ = ["MARKER_NAME", "alive", "find_marked", "kill_marked"]

MARKER_NAME = "REMOTE_ACP_TEST_MARK"


def alive(pid: int) -> bool:
    """Whether the process exists and is not a zombie (zombies count as dead)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return False
    return raw[raw.rindex(b")") + 2 : raw.rindex(b")") + 3] not in (b"Z", b"X")


def find_marked(marker: str) -> list[int]:
    needle = f"{MARKER_NAME}={marker}".encode()
    me = os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read()
        except OSError:
            continue
        if needle in environ.split(b"\0") and alive(int(name)):
            found.append(int(name))
    return found


def kill_marked(marker: str, settle_s: float = 6.0) -> list[str]:
    """Wait up to ``settle_s`` for marked processes to go; kill and describe any that stay."""
    deadline = time.monotonic() + settle_s
    while (pids := find_marked(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    described = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            cmd = "?"
        described.append(f"{pid}: {cmd[:200]}")
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return described
