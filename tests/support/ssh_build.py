"""Helpers shared by the tests of the ssh target's pure parts (``tests/test_ssh_*.py``)."""

from __future__ import annotations

import hashlib
import os
import pwd
import shlex
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from hostinv.sshopts import fallback_config_text
from remote_acp.errors import ErrorKind, RemoteAcpError
from remote_acp.targets.launch import LaunchSpec
from tests.support.orphans import MARKER_NAME

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from remote_acp.targets.ssh.target import SshTarget

__all__ = [
    "host_runs",
    "BASE_OPTIONS",
    "CONTROL_OPTIONS",
    "RUN_TIMEOUT_S",
    "SIGNAL_MARK",
    "WORKSPACE_MARK",
    "environ_with",
    "fake_ssh",
    "fallback_path",
    "line_after_session_mark",
    "prepare",
    "raises_kind",
    "session_config_text",
    "shells",
]

RUN_TIMEOUT_S = 15.0
WORKSPACE_MARK = "remote-acp: workspace unavailable:"
SIGNAL_MARK = "remote-acp: the agent was killed by signal"
BASE_OPTIONS = ["-T", "-e", "none", "-x", "-a", "-o", "BatchMode=yes"]
CONTROL_OPTIONS = ["-o", "ControlMaster=no", "-o", "ControlPath=none"]


@contextmanager
def raises_kind(kind: ErrorKind) -> Iterator[pytest.ExceptionInfo[RemoteAcpError]]:
    with pytest.raises(RemoteAcpError) as info:
        yield info
    assert info.value.kind is kind


def shells() -> list[list[str]]:
    """The POSIX shells on this machine to syntax-check with: sh, dash, and bash in POSIX mode."""
    found = [["sh"]]
    if shutil.which("dash"):
        found.append(["dash"])
    if shutil.which("bash"):
        found.append(["bash", "--posix"])
    return found


def line_after_session_mark(script: str) -> list[str]:
    """The script's lines from the command fragment to the end of the agent's brace group."""
    lines = script.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("{ export _RA_SESSION="))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("} <&3 3<&- &"))
    return lines[start + 1 : end]


def fake_ssh(directory: Path, body: str = "") -> Path:
    """An executable named ``ssh`` that logs its argv and prints ``body`` (for ``ssh -G``).

    Each run's words go one per line; the option probe's runs (``-F /dev/null ... remote-acp-probe``,
    see :func:`host_runs`) are logged too."""
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "ssh-argv.log"
    path = directory / "ssh"
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" >> {shlex.quote(str(log))}\nprintf '%s' {shlex.quote(body)}\n")
    path.chmod(0o755)
    return path


def environ_with(bin_dir: Path, **extra: str) -> dict[str, str]:
    env = {"PATH": str(bin_dir), "HOME": "/nonexistent", **extra}
    if MARKER_NAME in os.environ:  # so the orphan check covers the fake ssh too
        env[MARKER_NAME] = os.environ[MARKER_NAME]
    return env


def prepare(target: SshTarget, command: str | Sequence[str], workspace: str) -> LaunchSpec:
    spec = anyio.run(target.prepare, command, workspace)
    assert isinstance(spec, LaunchSpec)
    return spec


def session_config_text(config_file: str | None, *, home: str, host_key_fallback: bool = True) -> str:
    """The ssh_config a session's ``ssh`` gets (see :func:`fallback_path`): no connection sharing,
    the files ssh would read, then, with ``host_key_fallback``, our host-key policy."""
    return fallback_config_text(
        config_file, home=home, by="remote-acp", share_connections=False, host_key_fallback=host_key_fallback
    )


def fallback_path(config_file: str | None, *, host_key_fallback: bool = True) -> Path:
    """Where prepare wrote the generated config: the test's cache directory (the suite's conftest
    points ``REMOTE_ACP_CACHE_DIR`` at it)."""
    home = pwd.getpwuid(os.getuid()).pw_dir
    text = session_config_text(config_file, home=home, host_key_fallback=host_key_fallback)
    path = Path(os.environ["REMOTE_ACP_CACHE_DIR"]) / "ssh" / f"config-{hashlib.sha256(text.encode()).hexdigest()[:32]}"
    assert path.read_text() == text
    return path


def host_runs(log: Path) -> list[str]:
    """The logged words of the runs that asked about a host, without the option probe's runs
    (which end with the word ``remote-acp-probe``)."""
    words = log.read_text().split("\n")[:-1] if log.exists() else []
    runs: list[list[str]] = [[]]
    for word in words:
        runs[-1].append(word)
        if word in ("remote-acp-probe",) or (len(runs[-1]) > 1 and runs[-1][-2] == "--"):
            runs.append([])
    return [w for run in runs if run and run[-1] != "remote-acp-probe" for w in run]
