"""What the README says of a session over ssh: ``info.pid`` is the local ssh's pid."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import anyio
import pytest

from remote_acp import SshSettings, SshTarget, open_session
from tests.support.agents import fast_options, scripted

if TYPE_CHECKING:
    from pathlib import Path

    from integration.sshlab import SshLab

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def private_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMOTE_ACP_CACHE_DIR", str(tmp_path / "cache"))


async def test_info_pid_over_ssh_is_the_local_ssh(ssh_lab: SshLab) -> None:
    target = SshTarget("lab1", SshSettings(config_file=str(ssh_lab.config)))
    options = fast_options(scripted(), read_timeout_ms=5_000, stop_grace_ms=1_000)
    with anyio.fail_after(60):
        async with open_session("/tmp", options, target=target) as session:
            assert session.info is not None
            cmdline = await anyio.Path(f"/proc/{session.info.pid}/cmdline").read_bytes()
            argv = cmdline.split(b"\0")
            assert os.path.basename(argv[0]) == b"ssh"
