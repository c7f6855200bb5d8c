"""The file jail and hard links: a name in the workspace for a file outside it is neither read nor
written through, and a write replaces the file by a rename, never in place."""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING

import pytest

from remote_acp.protocol.jsonrpc import INVALID_PARAMS
from remote_acp.session.filesystem import FileAccess, FileServer, Refused, read_below, write_below

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    (tmp_path / "secret.txt").write_text("outside\n")
    os.link(tmp_path / "secret.txt", path / "inside.txt")  # one file, a name on each side of the jail
    return path


def refused(fn: object, *args: object) -> Refused:
    with pytest.raises(Refused) as caught:
        fn(*args)  # type: ignore[operator]
    return caught.value


def test_a_hard_link_to_a_file_outside_is_not_read(ws: Path) -> None:
    r = refused(read_below, str(ws), ("inside.txt",))
    assert r.code == INVALID_PARAMS and r.notice
    assert "2 hard links" in r.reason


def test_a_hard_link_to_a_file_outside_is_not_written_and_the_file_is_untouched(ws: Path) -> None:
    outside = ws.parent / "secret.txt"
    before = os.stat(outside)
    r = refused(write_below, str(ws), ("inside.txt",), "overwritten\n")
    assert r.code == INVALID_PARAMS and r.notice and "hard links" in r.reason
    after = os.stat(outside)
    assert outside.read_text() == "outside\n"
    assert (after.st_ino, after.st_size, after.st_nlink) == (before.st_ino, before.st_size, 2)
    assert os.stat(ws / "inside.txt").st_ino == before.st_ino  # the name was not replaced either
    assert sorted(os.listdir(ws)) == ["inside.txt"]  # no temporary file left behind


@pytest.mark.anyio
async def test_the_server_refuses_the_hard_link_and_names_it(ws: Path) -> None:
    server = FileServer(str(ws), FileAccess(read=True, write=True))
    path = str(ws / "inside.txt")
    for method, params in (
        ("fs/read_text_file", {"path": path}),
        ("fs/write_text_file", {"path": path, "content": "x"}),
    ):
        outcome = await server.serve(method, params)
        assert outcome.result is None and outcome.code == INVALID_PARAMS
        assert outcome.refusal is not None and "hard links" in outcome.refusal and path in outcome.message
    assert (ws.parent / "secret.txt").read_text() == "outside\n"


def test_a_write_replaces_the_file_so_an_open_reader_keeps_the_old_content(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    target = ws / "notes.txt"
    target.write_text("old content\n")
    target.chmod(0o640)
    old_inode = os.stat(target).st_ino
    with open(target) as reader:  # a descriptor held across the write
        write_below(str(ws), ("notes.txt",), "new\n")
        assert reader.read() == "old content\n"  # the old file was never truncated
    st = os.stat(target)
    assert target.read_text() == "new\n"
    assert st.st_ino != old_inode and st.st_nlink == 1
    assert stat.S_IMODE(st.st_mode) == 0o640  # the replaced file's permissions are kept
    assert sorted(os.listdir(ws)) == ["notes.txt"]


def test_a_new_file_gets_the_umask_mode_and_is_read_back(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    old_umask = os.umask(0o027)
    try:
        write_below(str(ws), ("fresh.txt",), "hello\n")
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(os.stat(ws / "fresh.txt").st_mode) == 0o640
    assert read_below(str(ws), ("fresh.txt",)) == "hello\n"


def test_a_symlink_out_is_still_refused_and_its_target_untouched(ws: Path) -> None:
    (ws / "link.txt").symlink_to(ws.parent / "secret.txt")
    assert "symbolic link" in refused(write_below, str(ws), ("link.txt",), "x").reason
    assert "symbolic link" in refused(read_below, str(ws), ("link.txt",)).reason
    assert (ws / "link.txt").is_symlink() and (ws.parent / "secret.txt").read_text() == "outside\n"


def test_a_directory_at_the_name_is_refused_and_nothing_is_left(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    assert "not a regular file" in refused(write_below, str(ws), ("sub",), "x").reason
    assert sorted(os.listdir(ws)) == ["sub"] and os.listdir(ws / "sub") == []
