"""An ``ssh`` first on PATH that counts its runs, for tests of what keeps ``ssh -G`` from running."""

from __future__ import annotations

import os
import shutil
import time
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["counted_ssh", "runs"]

SSH = shutil.which("ssh")
OLD = time.time() - 3600  # older than the run: a fresh file is never trusted by the resolve cache


def counted_ssh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put an ``ssh`` first on PATH that logs each run to the returned file and runs the real one."""
    if SSH is None:
        pytest.skip("needs OpenSSH's ssh")
    bin_dir, log = tmp_path / "bin", tmp_path / "runs.log"
    bin_dir.mkdir()
    wrapper = bin_dir / "ssh"
    wrapper.write_text(f'#!/bin/sh\necho run >> "{log}"\nexec {SSH} "$@"\n')
    wrapper.chmod(0o755)
    os.utime(wrapper, (OLD, OLD))
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    log.write_text("")
    return log


def runs(log: Path) -> int:
    """How many times the counted ``ssh`` ran."""
    return log.read_text().count("run")
