"""The README's first command, run as a new user runs it: ``./scripts/demo`` in a fresh clone,
with no virtualenv activated and a plain PATH.

The clone is of the committed tree (what a user gets), and the demo creates its own ``.venv``
and installs the package into it from the package index this machine is configured with (pip's
own configuration files, and ``PIP_*`` variables if set), which takes a few tens of seconds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.orphans import MARKER_NAME

REPO = Path(__file__).resolve().parents[1]


def plain_path() -> str:
    """A minimal PATH, plus the base interpreter's directory where it has no ``python3``."""
    path = "/usr/bin:/bin"
    if shutil.which("python3", path=path) is None:
        path = f"{Path(sys.base_prefix) / 'bin'}:{path}"
    return path


@pytest.mark.timeout(600)
def test_demo_runs_from_a_fresh_clone_in_a_plain_environment(tmp_path: Path) -> None:
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        pytest.skip("needs the repository's git history and git")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True, timeout=120)
    env = {
        "PATH": plain_path(),
        "HOME": str(tmp_path / "home"),
        "LANG": "C.UTF-8",
        # The test's own: saved sessions in the test's directory, and the orphan check's mark.
        "REMOTE_ACP_STATE_DIR": os.environ["REMOTE_ACP_STATE_DIR"],
        "REMOTE_ACP_CACHE_DIR": os.environ["REMOTE_ACP_CACHE_DIR"],
        MARKER_NAME: os.environ[MARKER_NAME],
        **{k: v for k, v in os.environ.items() if k.startswith("PIP_")},
    }
    done = subprocess.run(
        [str(clone / "scripts" / "demo")], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=540
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "permission outcome: selected reject",
        "Hello from an agent driven by remote-acp.",
        "A second turn on the same session.",
    ]
    assert "refused a permission request because this run is unattended" in done.stderr
    assert done.stderr.rstrip().endswith("session sess-1: turn_completed")
    assert (clone / ".venv" / "bin" / "remote-acp").exists()
