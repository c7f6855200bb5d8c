"""The untrusted-agent posture on a real agent process: the environment allow-list seen from inside
the agent, and file access served (or refused) over the wire."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from remote_acp import LocalTarget, Malformed, Notification, open_session
from remote_acp.session.filesystem import MAX_READ_BYTES
from tests.support.agents import fast_options, scripted
from tests.support.processes import environ

if TYPE_CHECKING:
    from remote_acp import Event, Session

pytestmark = pytest.mark.anyio


async def test_the_allowlist_is_all_the_agent_gets(
    workspace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEEP_ME", "kept")
    monkeypatch.setenv("DROP_ME", "dropped")
    monkeypatch.setenv("SOME_API_KEY", "sk-never-reaches-the-agent")
    monkeypatch.setenv("LC_TIME", "C")
    dump = tmp_path / "env.json"
    options = fast_options(scripted("--env-dump", str(dump)))
    target = LocalTarget(env_allowlist=("KEEP_ME",), extra_env={"ADDED": "by the caller"})
    async with open_session(workspace, options, target=target) as session:
        assert session.pid is not None
        seen = environ(session.pid)
    assert seen["KEEP_ME"] == "kept" and seen["ADDED"] == "by the caller"
    assert "DROP_ME" not in seen and "SOME_API_KEY" not in seen
    extra = {"KEEP_ME", "ADDED", "REMOTE_ACP_SESSION"}
    minimal = {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TMPDIR", "TZ"}
    assert {k for k in seen if not k.startswith("LC_")} <= minimal | extra
    assert seen["LC_TIME"] == "C" and seen["PATH"] == os.environ["PATH"]
    dumped = json.loads(dump.read_text())
    dumped.pop("__cwd__")
    assert dumped == seen  # what the agent itself read is what the kernel says it was given


async def test_without_an_allowlist_the_agent_inherits_everything(
    workspace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DROP_ME", "inherited")
    async with open_session(workspace, fast_options(scripted())) as session:
        assert session.pid is not None
        assert environ(session.pid)["DROP_ME"] == "inherited"


# -- file access over the wire -----------------------------------------------------------------


@pytest.fixture
def files(workspace: str) -> Path:
    ws = Path(workspace)
    (ws / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    (ws.parent / "secret.txt").write_text("top secret\n")
    return ws


async def turn(session: Session, prompt: str) -> tuple[list[str], list[str], list[Event]]:
    """The agent's whole messages and the notices of one turn, and all its events."""
    events: list[Event] = []
    await session.run_turn(prompt, events.append)
    said = [e.message for e in events if isinstance(e, Notification) and e.delta is None]
    notices = [m for m in said if m.startswith("refused fs/")]
    return [m for m in said if m not in notices], notices, events


async def test_read_is_served_inside_the_workspace_with_line_and_limit(workspace: str, files: Path) -> None:
    async with open_session(workspace, fast_options(scripted(), fs_read=True)) as session:
        said, notices, _ = await turn(session, f"@read={files / 'notes.txt'} @read-line=2 @read-limit=1 done")
        assert "read: beta\n" in said and not notices
        said, _, _ = await turn(session, f"@read={files / 'notes.txt'} done")
        assert "read: alpha\nbeta\ngamma\n" in said


ESCAPES: list[tuple[str, str]] = [
    ("ws/../secret.txt", "the path has a '..' component"),
    ("secret.txt", "the path is outside the workspace"),
    ("ws/out/secret.txt", "a directory on the path ('out') is a symbolic link"),
    ("ws/link.txt", "the file is a symbolic link"),
    ("ws/pipe", "not a regular file (a directory, device, FIFO or socket)"),
    ("ws/big.txt", f"the file is {MAX_READ_BYTES + 1} bytes, over the bound of {MAX_READ_BYTES}"),
]


async def test_every_escape_is_refused_with_an_error_and_a_notice(workspace: str, files: Path) -> None:
    base = files.parent
    (files / "out").symlink_to(base)
    (files / "link.txt").symlink_to(base / "secret.txt")
    os.mkfifo(files / "pipe")
    (files / "big.txt").write_bytes(b"x" * (MAX_READ_BYTES + 1))
    async with open_session(workspace, fast_options(scripted(), fs_read=True)) as session:
        for relative, reason in ESCAPES:
            path = f"{base}/{relative}"
            said, notices, _ = await turn(session, f"@read={path} done")
            assert f"read error -32602: {reason}: {path!r}" in said, relative
            assert notices == [f"refused fs/read_text_file of '{path}': {reason}"], relative
            assert not any("top secret" in m for m in said)


async def test_a_path_no_file_can_have_is_refused_and_the_session_goes_on(workspace: str, files: Path) -> None:
    """A lone surrogate survives JSON but no file name: refused as a request, never a crash."""
    path = f"{files}/\ud800"
    async with open_session(workspace, fast_options(scripted(), fs_read=True)) as session:
        said, notices, _ = await turn(session, f"@read={path} done")
        assert any("read error -32602: the path is not a file name this system can encode" in m for m in said)
        assert len(notices) == 1
        said, _, _ = await turn(session, f"@read={files / 'notes.txt'} done")
        assert "read: alpha\nbeta\ngamma\n" in said


async def test_write_is_off_unless_asked(workspace: str, files: Path) -> None:
    target = files / "new.txt"
    async with open_session(workspace, fast_options(scripted(), fs_read=True)) as session:
        said, _, events = await turn(session, f"@write={target} hello")
        assert "write error -32601: method not found" in said
        assert [e.detail for e in events if isinstance(e, Malformed)] == ["fs/write_text_file"]
    assert not target.exists()
    async with open_session(workspace, fast_options(scripted(), fs_write=True)) as session:
        said, _, _ = await turn(session, f"@write={target} hello")
        assert "wrote" in said
        said, notices, _ = await turn(session, f"@write={files.parent / 'secret.txt'} hello")
        assert notices and "outside the workspace" in notices[0]
    assert target.read_text() == "hello"
    assert (files.parent / "secret.txt").read_text() == "top secret\n"


async def test_nothing_is_served_unless_asked(workspace: str, files: Path) -> None:
    async with open_session(workspace, fast_options(scripted())) as session:
        said, _, events = await turn(session, f"@read={files / 'notes.txt'} done")
    assert "read error -32601: method not found" in said
    assert [e.detail for e in events if isinstance(e, Malformed)] == ["fs/read_text_file"]
