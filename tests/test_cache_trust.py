"""Caches and state are trusted only when this user alone can have written them: a cache root
another user can write (or owns) is refused with its reason and fix, by the library, the probes'
own reader and the CLI, before anything it holds is used."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from hostinv.keep import read_entry, untrusted
from remote_acp.errors import Cause, ErrorKind, RemoteAcpError
from remote_acp.paths import cache_base, cache_root, checked

if TYPE_CHECKING:
    from pathlib import Path

CLI = [sys.executable, "-m", "remote_acp.cli.main"]
OTHER_UID = 65534  # nobody


def test_a_private_directory_and_one_not_made_yet_are_trusted(tmp_path: Path) -> None:
    mine = tmp_path / "cache"
    mine.mkdir(mode=0o700)
    assert untrusted(mine) is None
    assert untrusted(tmp_path / "not-yet") is None


def test_a_directory_others_can_write_is_refused_with_its_mode(tmp_path: Path) -> None:
    shared = tmp_path / "cache"
    shared.mkdir()
    shared.chmod(0o777)
    assert untrusted(shared) == f"{shared} is writable by other users (mode 0777)"
    with pytest.raises(RemoteAcpError) as info:
        checked(shared)
    assert (info.value.kind, info.value.cause, info.value.retryable) == (
        ErrorKind.AGENT_NOT_FOUND,
        Cause.CONFIG_INVALID,
        False,
    )
    assert str(shared) in str(info.value) and "REMOTE_ACP_CACHE_DIR" in str(info.value)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory away needs root")
def test_a_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "cache"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    assert untrusted(theirs) == f"{theirs} belongs to uid {OTHER_UID}, not to this user (uid 0)"


def test_a_parent_others_can_write_is_refused_unless_sticky(tmp_path: Path) -> None:
    parent = tmp_path / "open"
    (parent / "cache").mkdir(parents=True, mode=0o700)
    (parent / "cache").chmod(0o700)
    parent.chmod(0o777)
    assert untrusted(parent / "cache") == f"{parent}, above it, is writable by other users (mode 0777)"
    parent.chmod(0o1777)  # as /tmp: no one renames what they do not own
    assert untrusted(parent / "cache") is None


def test_a_planted_entry_in_an_open_directory_is_not_read(tmp_path: Path) -> None:
    shared = tmp_path / "ssh-g"
    shared.mkdir()
    (shared / "entry.json").write_text(json.dumps({"version": 1, "files": {}, "answer": "proxycommand sh -c x"}))
    assert read_entry(str(shared), "entry", 1) is not None  # private: read
    shared.chmod(0o777)
    assert read_entry(str(shared), "entry", 1) is None


def test_the_cache_root_is_checked_where_it_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "cache"
    root.mkdir()
    root.chmod(0o775)
    monkeypatch.setenv("REMOTE_ACP_CACHE_DIR", str(root))
    assert cache_root() == root
    with pytest.raises(RemoteAcpError, match="is writable by other users"):
        cache_base()


def test_check_host_refuses_a_cache_others_can_write_before_probing(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    root.mkdir()
    root.chmod(0o777)
    env = {**os.environ, "REMOTE_ACP_CACHE_DIR": str(root), "HOME": str(tmp_path)}
    done = subprocess.run(
        [*CLI, "check", "host", "u@127.0.0.1:9", "--agent", "qwen", "--workspace", "/w", "--no-handshake"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 10, done.stderr
    assert f"will not use {root}: {root} is writable by other users (mode 0777)" in done.stderr
    assert done.stdout == ""
    assert list(root.iterdir()) == []  # nothing was kept there either


def test_a_session_history_others_can_write_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o777)
    env = {**os.environ, "REMOTE_ACP_STATE_DIR": str(state)}
    done = subprocess.run([*CLI, "sessions"], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 10, done.stderr
    assert f"will not use the session history in {state}" in done.stderr
