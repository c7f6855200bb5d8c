"""The ``remote-acp`` command run as a process, for tests that read what it prints."""

from __future__ import annotations

import json
import subprocess
import sys

__all__ = ["AGENT", "CLI", "cli", "json_lines"]

AGENT = f"{sys.executable} -m remote_acp.testing.scripted_agent"
"""The scripted agent, as ``--agent`` takes it."""

CLI = [sys.executable, "-m", "remote_acp.cli.main"]


def cli(*args: str, cwd: str | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run ``remote-acp ARGS`` and wait for it (text output)."""
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=cwd, timeout=timeout, check=False)


def json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()]
