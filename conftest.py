from __future__ import annotations

import logging
import os
import uuid
from typing import TYPE_CHECKING

import pytest

from remote_acp.targets.containment import close_launcher
from tests.support.orphans import MARKER_NAME, become_subreaper, kill_marked, live_children, settle_children

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


SUBREAPER = become_subreaper()
"""Orphans of the tests' processes come to this process, marked or not (tests/support/orphans.py)."""


@pytest.fixture(autouse=True)
def no_orphans() -> Iterator[None]:
    """Fail any test that leaves a process it started running (see tests/support/orphans.py)."""
    marker = uuid.uuid4().hex
    previous = os.environ.get(MARKER_NAME)
    os.environ[MARKER_NAME] = marker
    before = live_children() if SUBREAPER else set()
    try:
        yield
    finally:
        if previous is None:
            del os.environ[MARKER_NAME]
        else:
            os.environ[MARKER_NAME] = previous
        close_launcher()  # the process's supervisor launcher, started by the test's first session
        orphans = kill_marked(marker)
        unmarked = settle_children(before) if SUBREAPER else []
        assert not orphans, f"processes outlived the test: {orphans}"
        assert not unmarked, f"processes outlived the test (reparented to the test process): {unmarked}"


@pytest.fixture(autouse=True)
def private_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's saved sessions and the generated ssh configs go to the test's own directories,
    never the user's."""
    monkeypatch.setenv("REMOTE_ACP_STATE_DIR", str(tmp_path / "remote-acp-state"))
    monkeypatch.setenv("REMOTE_ACP_CACHE_DIR", str(tmp_path / "remote-acp-cache"))


@pytest.fixture(autouse=True)
def restore_root_logging() -> Iterator[None]:
    """The command line configures the root logger when a test runs it in this process; the
    next test starts with the root logger as it was."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # Tests marked both_backends run on asyncio and on trio.
    if "anyio_backend" in metafunc.fixturenames and metafunc.definition.get_closest_marker("both_backends"):
        metafunc.parametrize("anyio_backend", ["asyncio", "trio"])


@pytest.fixture
def workspace(tmp_path: os.PathLike[str]) -> str:
    path = os.path.join(os.fspath(tmp_path), "ws")
    os.mkdir(path)
    return path
