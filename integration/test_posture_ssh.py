"""Over ssh the file-system capabilities are never advertised, nor served, whatever the options
ask: the files the agent would read live on the host, and this client would serve its own."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from remote_acp import Malformed, Notification, open_session
from remote_acp.targets.ssh.settings import SshSettings
from remote_acp.targets.ssh.target import SshTarget
from tests.support.agents import fast_options, scripted

if TYPE_CHECKING:
    from pathlib import Path

    from integration.sshlab import SshLab
    from remote_acp import Event

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def private_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMOTE_ACP_CACHE_DIR", str(tmp_path / "cache"))


async def test_file_access_is_neither_advertised_nor_served_over_ssh(
    ssh_lab: SshLab, workspace: str, tmp_path: Path
) -> None:
    record = tmp_path / "record.jsonl"  # written by the agent on the host (the lab's hosts share this disk)
    here = tmp_path / "here.txt"
    here.write_text("a file of this machine\n")
    options = fast_options(
        scripted("--record", str(record)),
        read_timeout_ms=5_000,
        initialize_floor_ms=15_000,
        stop_grace_ms=1_000,
        fs_read=True,
        fs_write=True,
    )
    target = SshTarget("lab1", SshSettings(config_file=str(ssh_lab.config)))
    events: list[Event] = []
    async with open_session(workspace, options, target=target) as session:
        await session.run_turn(f"@read={here} done", events.append)
    (initialize,) = [m for m in map(json.loads, record.read_text().splitlines()) if m.get("method") == "initialize"]
    assert initialize["params"]["clientCapabilities"]["fs"] == {"readTextFile": False, "writeTextFile": False}
    said = [e.message for e in events if isinstance(e, Notification) and e.delta is None]
    assert "read error -32601: method not found" in said
    assert not any("a file of this machine" in m for m in said)
    assert [e.detail for e in events if isinstance(e, Malformed)] == ["fs/read_text_file"]
