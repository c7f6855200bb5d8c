"""Values carried with ``pass_env`` are secrets whatever their names: an agent on the host that
quotes one back (a tool title, its streamed reply, a stop reason, an update kind) has it masked in
every event, result and log record."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

import pytest

from remote_acp import ErrorKind, Event, Malformed, Notification, ToolResult, open_session
from remote_acp.masking import MASK
from remote_acp.targets.ssh.settings import SshSettings
from remote_acp.targets.ssh.target import SshTarget
from tests.support.agents import fast_options, scripted

if TYPE_CHECKING:
    from pathlib import Path

    from integration.sshlab import SshLab

pytestmark = pytest.mark.anyio

VALUE = "plain-looking-value-7315"  # neither the name nor the value looks secret


@pytest.fixture(autouse=True)
def private_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMOTE_ACP_CACHE_DIR", str(tmp_path / "cache"))


async def test_carried_value_quoted_back_by_the_agent_is_masked_everywhere(
    ssh_lab: SshLab, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("RA_DEMO_FLAVOUR", VALUE)
    target = SshTarget("lab1", SshSettings(config_file=str(ssh_lab.config), pass_env=("RA_DEMO_FLAVOUR",)))
    options = fast_options(scripted(), read_timeout_ms=5_000, initialize_floor_ms=15_000)
    events: list[Event] = []
    prompt = (
        "@title-from=RA_DEMO_FLAVOUR @update-from=RA_DEMO_FLAVOUR @say-from=RA_DEMO_FLAVOUR @stop-from=RA_DEMO_FLAVOUR"
    )
    with caplog.at_level(logging.DEBUG, logger="remote_acp"):
        async with open_session("/tmp", options, target) as session:
            result = await session.run_turn(prompt, events.append)
    assert result.error_kind is ErrorKind.TURN_OUTCOME_UNKNOWN  # the stop reason is the value
    assert [e.message for e in events if isinstance(e, ToolResult)] == [MASK]
    assert [e.detail for e in events if isinstance(e, Malformed)] == [MASK]
    assert "".join(e.delta or "" for e in events if isinstance(e, Notification)) == MASK
    assert result.stop_reason == MASK and result.last_message == MASK
    out = [json.dumps(e.to_json()) for e in events] + [json.dumps(result.to_json())]
    assert not [text for text in out if VALUE in text]
    assert not [r for r in caplog.records if VALUE in r.getMessage() or VALUE in str(r.__dict__)]
