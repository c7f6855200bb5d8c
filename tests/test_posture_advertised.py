"""What ``initialize`` advertises of the file system follows the options on a local launch
(seen in what the agent recorded of the wire); over ssh it is never advertised
(``integration/test_posture_ssh.py``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from remote_acp import open_session
from tests.support.agents import fast_options, scripted

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio


def sent_initialize(record: Path) -> dict[str, Any]:
    for line in record.read_text().splitlines():
        message = json.loads(line)
        if message.get("method") == "initialize":
            params: dict[str, Any] = message["params"]
            return params
    raise AssertionError("no initialize was recorded")


@pytest.mark.parametrize(
    ("asked", "advertised"),
    [({}, (False, False)), ({"fs_read": True}, (True, False)), ({"fs_read": True, "fs_write": True}, (True, True))],
)
async def test_the_capabilities_sent_follow_the_options(
    workspace: str, tmp_path: Path, asked: dict[str, bool], advertised: tuple[bool, bool]
) -> None:
    record = tmp_path / "record.jsonl"
    async with open_session(workspace, fast_options(scripted("--record", str(record)), **asked)):
        pass
    fs = sent_initialize(record)["clientCapabilities"]["fs"]
    assert (fs["readTextFile"], fs["writeTextFile"]) == advertised


@pytest.mark.parametrize(("read", "write"), [(False, False), (True, False), (True, True)])
def test_the_params_are_valid_for_the_official_sdk(read: bool, write: bool) -> None:
    from acp.schema import InitializeRequest

    from remote_acp.protocol.wire import initialize_params

    parsed = InitializeRequest.model_validate(initialize_params("1.0", fs_read=read, fs_write=write))
    assert parsed.client_capabilities is not None and parsed.client_capabilities.fs is not None
    assert (parsed.client_capabilities.fs.read_text_file, parsed.client_capabilities.fs.write_text_file) == (
        read,
        write,
    )
