from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from integration.qwen_fixtures import mock, out_file, qwen_installed, wire  # noqa: F401  (registered as fixtures)
from integration.sshlab import SshLab

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture(scope="module")
def homes() -> Iterator[Path]:
    """Where throwaway users' homes go (integration/users.py): a directory every user can traverse,
    which a pytest tmp_path (root's, mode 0700) is not."""
    base = Path(tempfile.mkdtemp(prefix="ra-homes-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def ssh_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshLab]:
    """Three loopback sshd hosts (lab1..lab3) and one in a network namespace (lab4)."""
    lab = SshLab(Path(tmp_path_factory.mktemp("sshlab")))
    try:
        yield lab.start(3, namespaced=True)
    finally:
        lab.stop()
