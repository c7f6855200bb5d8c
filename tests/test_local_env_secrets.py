"""Values an operator chose to pass to a local agent (the allow-list beyond the minimal set, the
extra environment) are masked wherever the agent's words go, whatever the variable's name, as
values carried over ssh are."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio
import pytest

from remote_acp import LocalTarget, RemoteAcpError, open_session
from remote_acp.masking import MASK
from tests.support.agents import fast_options, scripted

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio

VALUE = "postgres://app:hunter22@db.internal/prod"


async def test_an_allow_listed_value_the_agent_echoes_is_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("DB_URL", VALUE)  # no secret-looking word in the name
    monkeypatch.setenv("LANG", "C.UTF-8")  # the minimal set stays as it is
    target = LocalTarget(env_allowlist=("DB_URL",))
    command = scripted("--crash-at", "initialize", "--stderr", f"connecting to {VALUE} failed")
    caplog.set_level(logging.WARNING, logger="remote_acp")
    with anyio.fail_after(30), pytest.raises(RemoteAcpError) as info:
        async with open_session(str(tmp_path), fast_options(command), target):
            pass
    assert VALUE not in str(info.value) and f"connecting to {MASK} failed" in str(info.value)
    assert caplog.records and all(VALUE not in record.getMessage() for record in caplog.records)


async def test_an_extra_environment_value_is_masked_too(tmp_path: Path) -> None:
    target = LocalTarget(extra_env={"UPSTREAM": VALUE})
    command = scripted("--crash-at", "initialize", "--stderr", f"upstream {VALUE} refused")
    with anyio.fail_after(30), pytest.raises(RemoteAcpError) as info:
        async with open_session(str(tmp_path), fast_options(command), target):
            pass
    assert VALUE not in str(info.value) and f"upstream {MASK} refused" in str(info.value)
