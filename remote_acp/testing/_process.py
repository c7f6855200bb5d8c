"""Process helpers of the scripted agent: stderr logging, hard exits, files and sleeping children."""

from __future__ import annotations

import os
import sys

# The scripted agent starts for nearly every test and benchmark, so it imports as little as it
# can: ``typing`` alone would be a third of its start-up, ``dataclasses`` more than half.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn

SLEEPER_CODE = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_DFL); time.sleep(600)"

_children: list[object] = []  # keeps Popen objects alive: no "still running" warning at exit


def log(message: str) -> None:
    """Write one human-readable line to stderr; never fails."""
    try:
        sys.stderr.write(f"scripted-agent: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def hard_exit(code: int) -> NoReturn:
    """Flush what can be flushed and leave at once (no atexit, no thread joins)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def spawn_sleeper(*, new_session: bool, keep_stderr: bool, pid_file: str | None) -> int:
    """Start a child that sleeps 600 s holding our stdout (and stderr if asked)."""
    import subprocess  # here, not at the top: only this fault needs it, and start-up is measured

    child = subprocess.Popen(
        [sys.executable, "-c", SLEEPER_CODE],
        stdin=subprocess.DEVNULL,
        stderr=None if keep_stderr else subprocess.DEVNULL,
        start_new_session=new_session,
    )
    _children.append(child)
    if pid_file:
        write_text(pid_file, f"{child.pid}\n")
    return child.pid


def write_text(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
