"""File access jailed to the workspace: the pure jail, and the reads and writes on a real file system."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from remote_acp import SessionOptions
from remote_acp.protocol.jsonrpc import INVALID_PARAMS
from remote_acp.session.filesystem import (
    MAX_READ_BYTES,
    MAX_WRITE_BYTES,
    RESOURCE_NOT_FOUND,
    FileAccess,
    FileServer,
    ReadRequest,
    Refused,
    file_access,
    jail,
    parse_read,
    parse_write,
    read_below,
    select_lines,
    write_below,
)

if TYPE_CHECKING:
    from pathlib import Path

ROOTS = ("/srv/ws",)


# -- the pure parts ----------------------------------------------------------------------------


def test_jail_gives_the_components_below_the_workspace() -> None:
    assert jail(ROOTS, "/srv/ws/src/./main.py") == ("/srv/ws", ("src", "main.py"))
    assert jail(("/a", "/real/a"), "/real/a//b") == ("/real/a", ("b",))


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/srv/ws/../secret", "'..'"),
        ("/srv/ws/src/../../ws/x", "'..'"),
        ("/etc/passwd", "outside the workspace"),
        ("/srv/wsx/file", "outside the workspace"),
        ("/srv", "outside the workspace"),
        ("src/main.py", "not absolute"),
        ("/srv/ws", "the workspace itself"),
        ("/srv/ws/a\0b", "NUL"),
        ("/srv/ws/\ud800", "not a file name this system can encode"),
    ],
)
def test_jail_refuses(path: str, reason: str) -> None:
    with pytest.raises(Refused) as caught:
        jail(ROOTS, path)
    assert reason in caught.value.reason
    assert caught.value.code == INVALID_PARAMS
    assert caught.value.notice


def test_select_lines_is_one_based_and_keeps_line_ends() -> None:
    text = "one\ntwo\nthree\nfour"
    assert select_lines(text, None, None) == text
    assert select_lines(text, 2, None) == "two\nthree\nfour"
    assert select_lines(text, 2, 2) == "two\nthree\n"
    assert select_lines(text, None, 1) == "one\n"
    assert select_lines(text, 9, 3) == ""


@pytest.mark.parametrize(
    "params", [None, [], {}, {"path": ""}, {"path": 3}, {"path": "/x", "line": 0}, {"path": "/x", "limit": "2"}]
)
def test_malformed_read_params(params: object) -> None:
    with pytest.raises(Refused) as caught:
        parse_read(params)
    assert caught.value.code == INVALID_PARAMS
    assert not caught.value.notice  # a malformed request is not an escape attempt


def test_read_params() -> None:
    assert parse_read({"path": "/x", "line": 3, "limit": 4, "sessionId": "s"}) == ReadRequest("/x", 3, 4)


def test_write_content_is_bounded() -> None:
    parse_write({"path": "/x", "content": "é" * (MAX_WRITE_BYTES // 2)})
    with pytest.raises(Refused, match="over the bound"):
        parse_write({"path": "/x", "content": "é" * (MAX_WRITE_BYTES // 2 + 1)})


def test_file_access_follows_the_options_and_never_goes_remote() -> None:
    both = SessionOptions(command="agent", fs_read=True, fs_write=True)
    assert file_access(both, remote=False) == FileAccess(read=True, write=True)
    assert file_access(both, remote=True) == FileAccess()
    assert file_access(SessionOptions(command="agent", fs_read=True), remote=False) == FileAccess(read=True)
    assert not file_access(SessionOptions(command="agent"), remote=False).enabled


# -- on a real file system ---------------------------------------------------------------------


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    (path / "src").mkdir(parents=True)
    (path / "src" / "main.py").write_text("line 1\nline 2\nline 3\n")
    (tmp_path / "secret.txt").write_text("outside\n")
    return path


def refusal(fn: object, *args: object) -> Refused:
    with pytest.raises(Refused) as caught:
        fn(*args)  # type: ignore[operator]
    return caught.value


def test_reads_a_file_and_honours_line_and_limit(ws: Path) -> None:
    assert read_below(str(ws), ("src", "main.py")) == "line 1\nline 2\nline 3\n"
    assert read_below(str(ws), ("src", "main.py"), 2, 1) == "line 2\n"


def test_a_symlink_in_the_middle_is_refused(ws: Path) -> None:
    (ws / "out").symlink_to(ws.parent)
    r = refusal(read_below, str(ws), ("out", "secret.txt"))
    assert "symbolic link" in r.reason and r.notice


def test_a_symlink_to_a_directory_inside_is_refused_too(ws: Path) -> None:
    (ws / "alias").symlink_to(ws / "src")
    assert "symbolic link" in refusal(read_below, str(ws), ("alias", "main.py")).reason


def test_a_symlink_as_the_last_component_is_refused(ws: Path) -> None:
    (ws / "link.txt").symlink_to(ws.parent / "secret.txt")
    assert "symbolic link" in refusal(read_below, str(ws), ("link.txt",)).reason
    assert "symbolic link" in refusal(write_below, str(ws), ("link.txt",), "x").reason
    assert (ws.parent / "secret.txt").read_text() == "outside\n"


def test_a_fifo_is_refused_without_hanging(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    assert "not a regular file" in refusal(read_below, str(ws), ("pipe",)).reason
    assert "not a regular file" in refusal(write_below, str(ws), ("pipe",), "x").reason


def test_a_device_is_refused(ws: Path) -> None:
    # A device node needs privileges to create; a bind of /dev/zero is what an agent could
    # reach through a link, which the walk refuses anyway. Reach the node itself through the
    # jail's I/O with /dev as the root: the regular-file check is what refuses it.
    assert "not a regular file" in refusal(read_below, "/dev", ("zero",)).reason
    assert "not a regular file" in refusal(write_below, "/dev", ("null",), "x").reason


def test_a_directory_is_refused(ws: Path) -> None:
    assert "not a regular file" in refusal(read_below, str(ws), ("src",)).reason


def test_an_oversized_file_is_refused_even_for_one_line(ws: Path) -> None:
    (ws / "big.txt").write_bytes(b"x\n" * (MAX_READ_BYTES // 2 + 1))
    r = refusal(read_below, str(ws), ("big.txt",), 1, 1)
    assert "over the bound" in r.reason and r.notice
    (ws / "edge.txt").write_bytes(b"x" * MAX_READ_BYTES)
    assert len(read_below(str(ws), ("edge.txt",))) == MAX_READ_BYTES


def test_a_missing_file_is_an_ordinary_error(ws: Path) -> None:
    r = refusal(read_below, str(ws), ("src", "nope.py"))
    assert r.code == RESOURCE_NOT_FOUND and not r.notice
    assert refusal(write_below, str(ws), ("no-dir", "new.py"), "x").code == RESOURCE_NOT_FOUND


def test_write_creates_and_replaces_a_regular_file(ws: Path) -> None:
    write_below(str(ws), ("src", "new.py"), "fresh\n")
    assert (ws / "src" / "new.py").read_text() == "fresh\n"
    write_below(str(ws), ("src", "main.py"), "short\n")
    assert (ws / "src" / "main.py").read_text() == "short\n"


SWAPPER = """
import os, sys
target, inside, link, outside = sys.argv[1:]
while True:
    with open(inside, "w") as f:
        f.write("inside\\n")
    os.replace(inside, target)
    os.symlink(outside, link)
    os.replace(link, target)
"""


def test_a_file_swapped_for_a_symlink_is_never_followed(ws: Path) -> None:
    """Another process swaps a file and a link to a file outside as fast as it can while we
    read it: a check separate from the open loses that race now and then; an ``O_NOFOLLOW``
    open checked with ``fstat`` never does."""
    target = ws / "swap.txt"
    target.write_text("inside\n")
    args = [str(p) for p in (target, ws / ".inside", ws / ".link", ws.parent / "secret.txt")]
    swapper = subprocess.Popen([sys.executable, "-c", SWAPPER, *args])
    seen: dict[str, int] = {}
    try:
        for _ in range(20_000):
            try:
                got = read_below(str(ws), ("swap.txt",))
            except Refused as refused:
                got = refused.reason
            seen[got] = seen.get(got, 0) + 1
    finally:
        swapper.kill()
        swapper.wait()
    assert "outside\n" not in seen
    assert seen.get("inside\n") and seen.get("the file is a symbolic link")  # the race was run


@pytest.mark.anyio
async def test_the_server_names_the_path_and_refuses_what_was_not_advertised(ws: Path) -> None:
    server = FileServer(str(ws), FileAccess(read=True))
    assert server.handles("fs/read_text_file") and not server.handles("fs/write_text_file")
    outside = str(ws.parent / "secret.txt")
    outcome = await server.serve("fs/read_text_file", {"path": outside})
    assert outcome.result is None and outcome.code == INVALID_PARAMS
    assert outside in outcome.message and outcome.refusal == "the path is outside the workspace"
    ok = await server.serve("fs/read_text_file", {"path": str(ws / "src" / "main.py"), "line": 3})
    assert ok.result == {"content": "line 3\n"} and ok.refusal is None


@pytest.mark.anyio
async def test_the_server_accepts_the_resolved_spelling_of_the_workspace(tmp_path: Path, ws: Path) -> None:
    (tmp_path / "ws-link").symlink_to(ws)
    server = FileServer(str(tmp_path / "ws-link"), FileAccess(read=True))
    for path in (tmp_path / "ws-link" / "src" / "main.py", ws / "src" / "main.py"):
        outcome = await server.serve("fs/read_text_file", {"path": str(path), "limit": 1})
        assert outcome.result == {"content": "line 1\n"}
