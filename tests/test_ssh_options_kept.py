"""What the local ssh knows is kept as a cache entry (:mod:`hostinv.keep`), read back only from a
directory this user alone can write, and only in its own format."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from remote_acp.targets.ssh import argv as ssh_argv_module
from remote_acp.targets.ssh.argv import PROBED_OVERRIDES, local_ssh_options

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.process  # each test runs a stand-in ssh

ALL = frozenset(name for name, _ in PROBED_OVERRIDES)


@pytest.fixture
def counted_ssh(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An ``ssh`` that knows every option and logs each run; the process's memory of answers is
    empty, as in a new process, and restored after."""
    log = tmp_path / "runs.log"
    ssh = tmp_path / "bin" / "ssh"
    ssh.parent.mkdir()
    ssh.write_text(f"#!/bin/sh\necho run >> {shlex.quote(str(log))}\n")
    ssh.chmod(0o755)
    saved = dict(ssh_argv_module._known_options)
    ssh_argv_module._known_options.clear()
    yield str(ssh), log
    ssh_argv_module._known_options.clear()
    ssh_argv_module._known_options.update(saved)


def kept_directory() -> Path:
    return Path(os.environ["REMOTE_ACP_CACHE_DIR"]) / "ssh-options"


@pytest.mark.anyio
async def test_the_answer_is_a_versioned_entry_in_a_private_directory(counted_ssh: tuple[str, Path]) -> None:
    ssh, _ = counted_ssh
    assert await local_ssh_options(ssh, os.environ) == ALL
    assert kept_directory().stat().st_mode & 0o777 == 0o700
    (entry,) = kept_directory().iterdir()
    assert entry.suffix == ".json"
    assert json.loads(entry.read_text()) == {"version": 2, "files": {}, "options": sorted(ALL)}


@pytest.mark.anyio
async def test_an_answer_in_a_directory_others_can_write_is_asked_again(counted_ssh: tuple[str, Path]) -> None:
    ssh, log = counted_ssh
    assert await local_ssh_options(ssh, os.environ) == ALL
    kept_directory().chmod(0o777)  # anyone could have planted the entry
    ssh_argv_module._known_options.clear()
    assert await local_ssh_options(ssh, os.environ) == ALL
    assert log.read_text().count("run") == 2


@pytest.mark.anyio
async def test_a_cache_root_others_can_write_keeps_nothing(
    counted_ssh: tuple[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ssh, log = counted_ssh
    shared = tmp_path / "shared-cache"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("REMOTE_ACP_CACHE_DIR", str(shared))
    assert await local_ssh_options(ssh, os.environ) == ALL
    assert list(shared.iterdir()) == []
    ssh_argv_module._known_options.clear()
    assert await local_ssh_options(ssh, os.environ) == ALL
    assert log.read_text().count("run") == 2
