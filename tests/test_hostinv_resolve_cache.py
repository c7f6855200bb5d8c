"""ssh -G's answers kept on disk (hostinv.resolve_cache): reused while what ssh read is unchanged,
asked again the moment it changes, and never kept for a configuration that depends on more.

Every answer comes from the real ``ssh -G``, run through a wrapper on PATH that counts the runs.
"""

from __future__ import annotations

import os
import shutil
import time
from typing import TYPE_CHECKING

import pytest

from hostinv import resolve_cache
from hostinv.probes.runner import ProbeSettings, _resolve, _ResolveError
from tests.support.counted_ssh import counted_ssh, runs

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.anyio

SSH = shutil.which("ssh")
OLD = time.time() - 3600  # files older than the run: a fresh file is never trusted (see reading())


@pytest.fixture
def counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return counted_ssh(tmp_path, monkeypatch)


def aged(*paths: Path) -> None:
    for path in paths:
        os.utime(path, (OLD, OLD))


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    aged(path)
    return path


async def test_an_answer_is_kept_and_reused_while_the_config_is_unchanged(tmp_path: Path, counted: Path) -> None:
    config = write(tmp_path / "config", "Host web\n  HostName 192.0.2.7\n  Port 2200\n  User deploy\n")
    settings = ProbeSettings(ssh_config=str(config), resolve_cache=str(tmp_path / "cache"))
    first = await _resolve("web", settings)
    assert (first.hostname, first.port, first.user) == ("192.0.2.7", 2200, "deploy")
    assert await _resolve("web", settings) == first
    assert runs(counted) == 1
    # Another destination, port or user is another entry.
    assert (await _resolve("web", settings, port=2201)).port == 2201
    assert runs(counted) == 2


async def test_without_a_cache_directory_ssh_is_asked_every_time(tmp_path: Path, counted: Path) -> None:
    config = write(tmp_path / "config", "Host web\n  Port 2200\n")
    settings = ProbeSettings(ssh_config=str(config))
    await _resolve("web", settings)
    await _resolve("web", settings)
    assert runs(counted) == 2


async def test_an_edited_config_is_read_again(tmp_path: Path, counted: Path) -> None:
    config = write(tmp_path / "config", "Host web\n  Port 2200\n")
    settings = ProbeSettings(ssh_config=str(config), resolve_cache=str(tmp_path / "cache"))
    assert (await _resolve("web", settings)).port == 2200
    write(config, "Host web\n  Port 2300\n")  # same age as before: only the contents tell
    assert (await _resolve("web", settings)).port == 2300
    assert runs(counted) == 2


@pytest.mark.parametrize(
    ("directory", "include"),
    [("conf.d", "Include {}/*.conf"), ("my conf.d", 'Include "{}/*.conf"')],  # ssh's quoting for a space
)
async def test_a_file_added_to_an_included_directory_is_read(
    tmp_path: Path, counted: Path, directory: str, include: str
) -> None:
    included = tmp_path / directory
    included.mkdir()
    config = write(tmp_path / "config", include.format(included) + "\nHost web\n  User first\n")
    aged(included)
    settings = ProbeSettings(ssh_config=str(config), resolve_cache=str(tmp_path / "cache"))
    assert (await _resolve("web", settings)).user == "first"
    assert (await _resolve("web", settings)).user == "first"
    assert runs(counted) == 1
    write(included / "a.conf", "Host web\n  User second\n")  # read before the Host block: it wins
    assert (await _resolve("web", settings)).user == "second"
    assert runs(counted) == 2
    aged(included)
    assert (await _resolve("web", settings)).user == "second"
    assert runs(counted) == 3  # the answer with a.conf was read just after a.conf came: not kept then
    assert (await _resolve("web", settings)).user == "second"
    assert runs(counted) == 3
    # An edit of the included file itself, and a file removed.
    write(included / "a.conf", "Host web\n  User third\n")
    assert (await _resolve("web", settings)).user == "third"
    (included / "a.conf").unlink()
    aged(included)
    assert (await _resolve("web", settings)).user == "first"
    assert runs(counted) == 5


async def test_a_variable_the_config_names_is_part_of_the_answer(
    tmp_path: Path, counted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ssh expands ${NAME} in some options when it uses them: an answer is kept per value.
    config = write(tmp_path / "config", "Host web\n  IdentityFile ${RA_TEST_KEYS}/id\n")
    settings = ProbeSettings(ssh_config=str(config), resolve_cache=str(tmp_path / "cache"))
    monkeypatch.setenv("RA_TEST_KEYS", "/keys/one")
    await _resolve("web", settings)
    await _resolve("web", settings)
    assert runs(counted) == 1
    monkeypatch.setenv("RA_TEST_KEYS", "/keys/two")
    await _resolve("web", settings)
    assert runs(counted) == 2
    monkeypatch.delenv("RA_TEST_KEYS")
    await _resolve("web", settings)
    assert runs(counted) == 3


@pytest.mark.parametrize(
    "dynamic",
    [
        "Match exec true\n  Port 2400\n",
        "CanonicalizeHostname yes\n",
        "Match canonical host web\n  Port 2400\n",
    ],
)
async def test_a_config_that_depends_on_more_than_its_text_is_never_kept(
    tmp_path: Path, counted: Path, dynamic: str
) -> None:
    config = write(tmp_path / "config", f"Host web\n  User deploy\n{dynamic}")
    settings = ProbeSettings(ssh_config=str(config), resolve_cache=str(tmp_path / "cache"))
    await _resolve("web", settings)
    await _resolve("web", settings)
    assert runs(counted) == 2
    assert not list((tmp_path / "cache").glob("*.json"))


async def test_a_config_changed_just_before_the_run_is_not_kept(tmp_path: Path, counted: Path) -> None:
    # Written now: it may have changed between ssh's reading and ours, so the answer is not kept.
    config = tmp_path / "config"
    config.write_text("Host web\n  Port 2200\n")
    settings = ProbeSettings(ssh_config=str(config), resolve_cache=str(tmp_path / "cache"))
    await _resolve("web", settings)
    await _resolve("web", settings)
    assert runs(counted) == 2
    aged(config)
    await _resolve("web", settings)
    await _resolve("web", settings)
    assert runs(counted) == 3


async def test_why_ssh_refused_the_config_is_its_own_line_not_the_verbose_chatter(
    tmp_path: Path, counted: Path
) -> None:
    config = write(tmp_path / "config", "Host web\n  NoSuchOption yes\n")
    settings = ProbeSettings(ssh_config=str(config), resolve_cache=str(tmp_path / "cache"))
    with pytest.raises(_ResolveError) as raised:
        await _resolve("web", settings)
    assert "Bad configuration option" in str(raised.value) and "nosuchoption" in str(raised.value)
    assert not str(raised.value).startswith(("debug", "OpenSSH_"))


async def test_a_damaged_entry_is_a_miss(tmp_path: Path, counted: Path) -> None:
    config = write(tmp_path / "config", "Host web\n  Port 2200\n")
    cache = tmp_path / "cache"
    settings = ProbeSettings(ssh_config=str(config), resolve_cache=str(cache))
    await _resolve("web", settings)
    (entry,) = cache.glob("*.json")
    entry.write_text("{not json")
    assert (await _resolve("web", settings)).port == 2200
    assert runs(counted) == 2


def test_a_default_config_file_that_appears_invalidates_the_answer(tmp_path: Path) -> None:
    # Without -F, ssh looks for ~/.ssh/config whether or not it exists: its absence is recorded,
    # so creating it is a change. (Exercised on the pure functions: the real ~/.ssh is not ours.)
    user_config = tmp_path / "home" / ".ssh" / "config"
    found = resolve_cache.reading([], [str(user_config)], home=str(tmp_path / "home"), environ={}, since_ns=0)
    assert found.files == {str(user_config): "absent"} and found.why_not is None
    answer = "hostname 192.0.2.7\nport 22\nuser deploy\n"
    resolve_cache.store(str(tmp_path / "cache"), "entry", found, answer)
    assert resolve_cache.lookup(str(tmp_path / "cache"), "entry", {}) == answer
    user_config.parent.mkdir(parents=True)
    user_config.write_text("Host *\n  Port 2222\n")
    assert resolve_cache.lookup(str(tmp_path / "cache"), "entry", {}) is None


def test_the_files_ssh_read_are_taken_from_its_verbose_lines() -> None:
    stderr = (
        "OpenSSH_9.2p1 Debian-2+deb12u10, OpenSSL 3.0.19 27 Jan 2026\n"
        "debug1: Reading configuration data /home/u/.ssh/config\n"
        "debug1: /home/u/.ssh/config line 1: include /home/u/.ssh/conf.d/*.conf matched no files\n"
        "debug1: Reading configuration data /etc/ssh/ssh_config\n"
        "debug1: Reading configuration data /etc/ssh/ssh_config.d/my config.conf\n"
    )
    assert resolve_cache.config_files_read(stderr) == [
        "/home/u/.ssh/config",
        "/etc/ssh/ssh_config",
        "/etc/ssh/ssh_config.d/my config.conf",
    ]


@pytest.mark.parametrize(
    ("line", "directories"),
    [
        ("/etc/ssh/ssh_config.d/*.conf", ["/etc/ssh/ssh_config.d"]),
        ("~/.ssh/conf.d/*", ["/home/u/.ssh/conf.d"]),
        ("conf.d/*.conf", ["/home/u/.ssh/conf.d", "/etc/ssh/conf.d"]),
        ("extra", ["/home/u/.ssh", "/etc/ssh"]),
        ('"/srv/my conf/*.conf" /etc/a/b', ["/srv/my conf", "/etc/a"]),
        ("/srv/*/config", None),  # a pattern in the directory: any new directory would count
        ("/srv/${SITE}/config", None),
        ("/srv/%u/config", None),
        ('"/srv/unclosed', None),
    ],
)
def test_the_directories_an_include_looks_in(line: str, directories: list[str] | None) -> None:
    assert resolve_cache._include_dirs(line, "/home/u") == directories


class _Clock:
    """``time`` as ``resolve_cache`` sees it, with a monotonic clock the test moves on."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)

    def monotonic(self) -> float:
        return time.monotonic() + self.ahead


def test_the_ssh_a_path_finds_is_searched_for_once_a_moment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(resolve_cache, "time", clock)
    first, second = tmp_path / "a", tmp_path / "b"
    for directory in (first, second):
        directory.mkdir()
        (directory / "ssh").write_text("#!/bin/sh\n")
        (directory / "ssh").chmod(0o755)
    assert resolve_cache.which_ssh({"PATH": str(first)}) == str(first / "ssh")
    (first / "ssh").unlink()  # within the moment the answer stands; another PATH is its own
    assert resolve_cache.which_ssh({"PATH": str(first)}) == str(first / "ssh")
    assert resolve_cache.which_ssh({"PATH": f"{first}:{second}"}) == str(second / "ssh")
    clock.ahead = resolve_cache._WHICH_FOR_S + 0.05  # the moment has passed
    assert resolve_cache.which_ssh({"PATH": str(first)}) == "ssh"  # none there now
