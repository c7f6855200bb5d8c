"""The caches' shared file handling: entries written whole, read back while their files are unchanged."""

from __future__ import annotations

import json
import os
import stat
from typing import TYPE_CHECKING

import pytest

from hostinv.keep import ABSENT, digest, read_entry, write_whole

if TYPE_CHECKING:
    from pathlib import Path


def test_a_write_replaces_the_file_whole_and_leaves_nothing_beside_it(tmp_path: Path) -> None:
    target = tmp_path / "entry.json"
    target.write_text("old")
    write_whole(target, b"new", prefix=".t-")
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600  # the cache is its owner's alone
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry.json"]


def test_a_write_that_fails_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "entry.json"
    target.write_text("old")
    with pytest.raises(TypeError):
        write_whole(target, "not bytes", prefix=".t-")  # type: ignore[arg-type]
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry.json"]
    with pytest.raises(OSError):
        write_whole(tmp_path / "missing" / "entry.json", b"x", prefix=".t-")


def test_an_entry_is_read_back_only_while_its_files_are_unchanged(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.write_text("a")
    gone = str(tmp_path / "gone")
    files = {str(source): digest(str(source)), gone: ABSENT}
    (tmp_path / "e.json").write_text(json.dumps({"version": 2, "files": files, "answer": 1}))
    assert read_entry(str(tmp_path), "e", 2) == {"version": 2, "files": files, "answer": 1}
    assert read_entry(str(tmp_path), "e", 3) is None  # another version's
    os.utime(source, (0, 0))
    assert read_entry(str(tmp_path), "e", 2) is not None  # touched, same bytes
    source.write_text("b")
    assert read_entry(str(tmp_path), "e", 2) is None
    source.write_text("a")
    (tmp_path / "gone").write_text("")  # a file that was absent appeared
    assert read_entry(str(tmp_path), "e", 2) is None


@pytest.mark.parametrize("text", ["", "[1]", '{"version": 2}', '{"version": 2, "files": []}', "\xff"])
def test_an_entry_that_does_not_read_is_none(tmp_path: Path, text: str) -> None:
    (tmp_path / "e.json").write_text(text, encoding="latin-1")
    assert read_entry(str(tmp_path), "e", 2) is None
    assert read_entry(str(tmp_path), "missing", 2) is None
