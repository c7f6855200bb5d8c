"""A real agent that reads through the client: qwen-code, given ``fs.readTextFile``, asks for the
file with ``fs/read_text_file`` instead of reading it itself, and completes its turn with what we
served. (The escape attempts are driven by the scriptable agent in ``tests/test_posture.py``: qwen
checks its own paths before it asks, so it never sends them.)"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from integration.qwen_fixtures import qwen_options, qwen_target
from remote_acp import Event, TurnCompleted, open_session
from tests.support.openai_mock import TextReply, ToolCallReply

if TYPE_CHECKING:
    from pathlib import Path

    from integration.qwen_fixtures import WireTap
    from tests.support.openai_mock import OpenAIMock

pytestmark = [pytest.mark.anyio, pytest.mark.qwen, pytest.mark.usefixtures("qwen_installed")]


def read_file_call(path: str) -> ToolCallReply:
    """A call of qwen-code's ``read_file`` tool (argument ``file_path``, absolute)."""
    return ToolCallReply.single("read_file", {"file_path": path})


async def test_qwen_reads_through_the_client_and_completes_its_turn(
    workspace: str, tmp_path: Path, mock: OpenAIMock, wire: WireTap
) -> None:
    notes = anyio.Path(workspace) / "notes.txt"
    await notes.write_text("the marker is PAPAYA-42\n")
    mock.enqueue(read_file_call(str(notes)), TextReply("The marker is PAPAYA-42."))
    events: list[Event] = []
    options = qwen_options(fs_read=True)
    async with open_session(workspace, options, qwen_target(tmp_path / "home", mock)) as session:
        with anyio.fail_after(60):
            result = await session.run_turn("what is the marker in notes.txt?", events.append)
    assert result.ok and result.outcome == "turn_completed" and isinstance(events[-1], TurnCompleted)
    assert wire.ours()[0]["params"]["clientCapabilities"]["fs"] == {"readTextFile": True, "writeTextFile": False}
    (asked,) = wire.their_requests("fs/read_text_file")
    assert asked["params"]["path"] == str(notes)
    assert wire.our_answer(asked["id"])["result"] == {"content": "the marker is PAPAYA-42\n"}
    # What we served is what the model was given back as the tool's result.
    (_, second) = mock.turn_requests()
    assert any("PAPAYA-42" in str(r) for r in second.tool_results)
