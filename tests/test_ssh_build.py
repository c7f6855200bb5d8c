"""The pure parts of the SSH launch target, tested as data: no ssh connection, no sshd.

The remote script is an ordinary POSIX sh script reading stdin, so its promises (the workspace
and the command words arrive intact, a failing ``cd`` never runs the command, the environment
comes over stdin, exit statuses and signals are reported) are proven by running it locally with
``sh -c SCRIPT``. Those runs are slow-ish (the script's watchdog polls once a second), so they are
started together once per module and each test reads its own result.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pwd
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import anyio
import pytest

from remote_acp.errors import ErrorKind, RemoteAcpError
from remote_acp.targets.launch import LaunchSpec
from remote_acp.targets.process import ExitStatus
from remote_acp.targets.ssh import (
    Destination,
    HostKeyPolicy,
    SshSettings,
    SshTarget,
    env_preamble,
    fallback_config_text,
    parse_destination,
    remote_script,
    ssh_argv,
)
from remote_acp.targets.ssh_config import effective_host_key_policy, fallback_config_dir, write_fallback_config
from tests.support.orphans import MARKER_NAME, alive, kill_marked

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence
    from pathlib import Path

RUN_TIMEOUT_S = 15.0
WORKSPACE_MARK = "remote-acp: workspace unavailable:"
SIGNAL_MARK = "remote-acp: the agent was killed by signal"
ENV_MESSAGE = "remote-acp: the environment sent on stdin did not arrive whole"

# Words a list command must deliver intact: quotes, expansions, separators, globs, blanks, newlines.
HOSTILE_WORDS = [
    "it's",
    'say "hi"',
    "$HOME",
    "${PATH}",
    "`id`",
    "$(id)",
    "a; touch pwned",
    "x && y || z",
    "two  spaces",
    "*",
    "?.py",
    "~",
    "line1\nline2",
    "tab\there",
    "-n",
    "--",
    "",
    "back\\slash",
    "#not-a-comment",
    "ünïcödé",
    "> redirect",
]
# A workspace directory name with spaces, quotes, `$`, `;`, a backtick, a glob, a backslash, a
# newline and a leading dash.
HOSTILE_DIR = '-ws it\'s "dq" $HOME; `id` * back\\slash new\nline'
PRINT_CWD_AND_ARGS = "import os,sys,json; print(json.dumps([os.getcwd(), sys.argv[1:]]))"
PRINT_ENV_AND_STDIN = (
    "import os,sys,json; data = sys.stdin.buffer.read(); "
    "print(json.dumps({'env': dict(os.environ), 'stdin': data.hex()}))"
)
# Values carried in the environment preamble: quotes, newlines, expansions, blanks, non-ASCII.
ENV_VALUES = {
    "QUOTED": 'it\'s "quoted"',
    "DOLLAR": "$HOME ${PATH} `id` $(id) \\$x",
    "MULTI": "line1\nline2\n",
    "EMPTY": "",
    "BLANKS": "  lead and trail  ",
    "UNICODE": "ünïcödé ✓",
    "GLOB": "* ?",
    "SEMI": "a; exit 3",
}
# What follows the preamble on stdin: protocol bytes, things that look like shell, binary.
STDIN_REST = b'{"jsonrpc":"2.0","id":1,"method":"initialize"}\nexport X=1; _RA_COMPLETE=1\n\x00\xff\xfe tail'


@contextmanager
def raises_kind(kind: ErrorKind) -> Iterator[pytest.ExceptionInfo[RemoteAcpError]]:
    with pytest.raises(RemoteAcpError) as info:
        yield info
    assert info.value.kind is kind


def shells() -> list[list[str]]:
    """The POSIX shells on this machine to syntax-check with: sh, dash, and bash in POSIX mode."""
    found = [["sh"]]
    if shutil.which("dash"):
        found.append(["dash"])
    if shutil.which("bash"):
        found.append(["bash", "--posix"])
    return found


def line_after_session_mark(script: str) -> list[str]:
    """The script's lines from the command fragment to the end of the agent's brace group."""
    lines = script.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("{ export _RA_SESSION="))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("} <&3 3<&- &"))
    return lines[start + 1 : end]


# -- parse_destination --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "host", "port", "label"),
    [
        ("build", "build", None, "build"),
        ("build-host.example.com", "build-host.example.com", None, "build-host.example.com"),
        ("  build  ", "build", None, "build"),
        ("build\n", "build", None, "build"),
        ("user@build", "user@build", None, "user@build"),
        ("build:2222", "build", 2222, "build:2222"),
        ("user@build:22", "user@build", 22, "user@build:22"),
        ("10.0.0.5:1", "10.0.0.5", 1, "10.0.0.5:1"),
        ("host:65535", "host", 65535, "host:65535"),
        ("[::1]:2222", "::1", 2222, "[::1]:2222"),
        ("[fe80::1]", "fe80::1", None, "fe80::1"),
        ("[build]:22", "build", 22, "build:22"),
        ("::1", "::1", None, "::1"),
        ("fe80::1:2", "fe80::1:2", None, "fe80::1:2"),
        ("2001:db8::42", "2001:db8::42", None, "2001:db8::42"),
        ("a@b@build", "a@b@build", None, "a@b@build"),
        ("user.name@127.0.0.2:2201", "user.name@127.0.0.2", 2201, "user.name@127.0.0.2:2201"),
    ],
)
def test_parse_destination_accepts(text: str, host: str, port: int | None, label: str) -> None:
    destination = parse_destination(text)
    assert destination == Destination(host, port)
    assert destination.label == label


def test_destination_label_brackets_an_ipv6_host_with_a_port() -> None:
    assert Destination("::1", 22).label == "[::1]:22"
    assert Destination("::1").label == "::1"
    assert Destination("build", 2222).label == "build:2222"
    assert Destination("build").label == "build"


def test_destination_label_of_user_at_ipv6_with_port() -> None:
    destination = parse_destination("user@[::1]:22")
    assert destination == Destination("user@::1", 22)
    assert destination.label == "user@[::1]:22"


@pytest.mark.parametrize(
    "text",
    ["host:0", "host:65536", "host:99999", "host:abc", "host:", "host:-1", "host:+22", "host:2.2"]
    + ["[::1]:0", "[::1]:65536", "[::1]:x", "[::1]:", "user@host:ssh", "host:0x16"],
)
def test_parse_destination_refuses_a_bad_port(text: str) -> None:
    with raises_kind(ErrorKind.AGENT_NOT_FOUND) as info:
        parse_destination(text)
    assert info.value.message == f"the ssh destination {text!r} has an invalid port"


@pytest.mark.parametrize("text", ["host:\u00b2", "host:\u0662\u0662", "[::1]:\u00b9"])
def test_parse_destination_refuses_non_ascii_digits_in_the_port(text: str) -> None:
    with raises_kind(ErrorKind.AGENT_NOT_FOUND) as info:
        parse_destination(text)
    assert info.value.message == f"the ssh destination {text!r} has an invalid port"


@pytest.mark.parametrize(
    "text",
    ["", " ", "   ", "\t", "\n", "bu ild", "user@bu ild", "a\tb", "host\x00", "ho\x1bst", "h\x01", "\u00a0"]
    + ["bu\x85ild", "user @build", "a\nb"],
)
def test_parse_destination_refuses_empty_blanks_and_control_characters(text: str) -> None:
    with raises_kind(ErrorKind.AGENT_NOT_FOUND) as info:
        parse_destination(text)
    assert info.value.message == f"the ssh destination {text!r} is empty or contains blanks"


@pytest.mark.parametrize("text", ["ho\x7fst", "ho\x9b31mst"])
def test_parse_destination_refuses_del_and_c1_controls(text: str) -> None:
    with raises_kind(ErrorKind.AGENT_NOT_FOUND):
        parse_destination(text)


@pytest.mark.parametrize(
    "text",
    ["-oProxyCommand=touch pwned", "-host", "-F/tmp/x", "--", "-", "-user@host", "user@-host", "-u@-h"]
    + ["[-oProxyCommand=x]:22", "[-x]", "-host:22", "  -host", "user@", "@", ":22", "[]:22", "[]", "user@:22"],
)
def test_parse_destination_refuses_what_could_read_as_an_option(text: str) -> None:
    with raises_kind(ErrorKind.AGENT_NOT_FOUND) as info:
        parse_destination(text)
    if " " in text.strip():  # blanks are refused first
        assert "is empty or contains blanks" in info.value.message
    else:
        assert info.value.message == f"the ssh destination {text!r} is refused: it would read as an option"


@pytest.mark.parametrize("text", ["[::1", "[::1]x", "[::1]2222", "user@[::1", "[::1]]:22"])
def test_parse_destination_refuses_malformed_brackets(text: str) -> None:
    with raises_kind(ErrorKind.AGENT_NOT_FOUND) as info:
        parse_destination(text)
    assert info.value.message == f"the ssh destination {text!r} is not well formed"


def test_ssh_target_label_comes_from_the_destination() -> None:
    assert SshTarget("user@build:2222").label == "user@build:2222"
    assert SshTarget("[::1]:2201").label == "[::1]:2201"
    assert SshTarget("build").remote is True
    with raises_kind(ErrorKind.AGENT_NOT_FOUND):
        _ = SshTarget("-oProxyCommand=x").label


# -- ssh_argv -----------------------------------------------------------------------------------

BASE_OPTIONS = ["-T", "-e", "none", "-x", "-a", "-o", "BatchMode=yes"]


def test_ssh_argv_default_settings_give_the_fallback_config_and_no_policy_option() -> None:
    config = "/home/u/.cache/remote-acp/ssh/config-0123"
    argv = ssh_argv("/usr/bin/ssh", Destination("build"), SshSettings(), "echo hi", config=config)
    assert argv == [
        "/usr/bin/ssh",
        "-F", "/home/u/.cache/remote-acp/ssh/config-0123",
        "-T",
        "-e", "none",
        "-x",
        "-a",
        "-o", "BatchMode=yes",
        "-o", "ConnectTimeout=10",
        "-o", "ServerAliveInterval=15",
        "-o", "ServerAliveCountMax=3",
        "-o", "LogLevel=ERROR",
        "--", "build", "exec sh -c 'echo hi'",
    ]  # fmt: skip
    assert not any("StrictHostKeyChecking" in word for word in argv)  # the config's fallback decides


def test_ssh_argv_without_a_config_passes_no_file() -> None:
    argv = ssh_argv("ssh", Destination("build"), SshSettings(), "echo hi", config=None)
    assert argv == [
        "ssh",
        *BASE_OPTIONS,
        "-o", "ConnectTimeout=10",
        "-o", "ServerAliveInterval=15",
        "-o", "ServerAliveCountMax=3",
        "-o", "LogLevel=ERROR",
        "--", "build", "exec sh -c 'echo hi'",
    ]  # fmt: skip


def test_ssh_argv_with_config_file_port_timeouts_and_policy_yes() -> None:
    settings = SshSettings(
        host_key_policy="yes",
        config_file="/etc/remote acp/ssh_config",
        connect_timeout_s=3,
        server_alive_interval_s=5,
        server_alive_count_max=2,
    )
    argv = ssh_argv("/opt/ssh", Destination("user@::1", 2201), settings, "true", config=settings.config_file)
    assert argv == [
        "/opt/ssh",
        "-F", "/etc/remote acp/ssh_config",
        *BASE_OPTIONS,
        "-o", "ConnectTimeout=3",
        "-o", "ServerAliveInterval=5",
        "-o", "ServerAliveCountMax=2",
        "-o", "LogLevel=ERROR",
        "-o", "StrictHostKeyChecking=yes",
        "-p", "2201",
        "--", "user@::1", "exec sh -c true",
    ]  # fmt: skip


def test_ssh_argv_explicit_policy_accept_new_goes_on_the_command_line() -> None:
    argv = ssh_argv("ssh", Destination("build"), SshSettings(host_key_policy="accept-new"), "x", config=None)
    assert argv == [
        "ssh",
        *BASE_OPTIONS,
        "-o", "ConnectTimeout=10",
        "-o", "ServerAliveInterval=15",
        "-o", "ServerAliveCountMax=3",
        "-o", "LogLevel=ERROR",
        "-o", "StrictHostKeyChecking=accept-new",
        "--", "build", "exec sh -c x",
    ]  # fmt: skip


def test_ssh_argv_forced_no_policy_and_port_without_config() -> None:
    settings = SshSettings(host_key_policy="no", force_insecure_host_keys=True, server_alive_count_max=1)
    argv = ssh_argv("ssh", Destination("build", 22), settings, "x", config=None)
    assert argv == [
        "ssh",
        *BASE_OPTIONS,
        "-o", "ConnectTimeout=10",
        "-o", "ServerAliveInterval=15",
        "-o", "ServerAliveCountMax=1",
        "-o", "LogLevel=ERROR",
        "-o", "StrictHostKeyChecking=no",
        "-p", "22",
        "--", "build", "exec sh -c x",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "remote",
    ["echo hi", "it's a 'test'", 'a "b" $c `d` $(e); f && g', "line1\nline2\n", "", "-n", "\\ *", "ünï"],
)
def test_ssh_argv_remote_command_is_one_word_exec_sh_c(remote: str) -> None:
    argv = ssh_argv("ssh", Destination("build", 2222), SshSettings(), remote, config="/c")
    # `--` comes immediately before the destination, which is followed by the one remote word.
    assert argv[-3:-1] == ["--", "build"]
    assert argv.count("--") == 1
    assert argv[-1].startswith("exec sh -c ")
    assert shlex.split(argv[-1]) == ["exec", "sh", "-c", remote]


def test_ssh_argv_remote_word_runs_the_script_through_a_login_shell() -> None:
    # The far side's login shell runs `$SHELL -c WORD`; the word must hand the script over intact.
    script = "printf '%s|' \"$0\" 'it'\"'\"'s' \"$HOME\" '$HOME'"
    argv = ssh_argv("ssh", Destination("build"), SshSettings(), script, config=None)
    env = {**os.environ, "HOME": "/home/h"}
    done = subprocess.run(["sh", "-c", argv[-1]], capture_output=True, env=env, timeout=RUN_TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"sh|it's|/home/h|$HOME|"


# -- the fallback ssh_config -------------------------------------------------------------------


@pytest.fixture(autouse=True)
def private_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Generated ssh_configs go to the test's own directory, never the user's cache."""
    monkeypatch.setenv("REMOTE_ACP_CACHE_DIR", str(tmp_path / "cache"))


def test_fallback_config_includes_what_ssh_reads_by_default_then_accept_new() -> None:
    assert fallback_config_text(None, home="/home/u") == (
        "# Written by remote-acp: the ssh_config ssh would read, then our default host-key policy.\n"
        'Include "/home/u/.ssh/config"\n'
        'Include "/etc/ssh/ssh_config"\n'
        "Host *\n"
        "  StrictHostKeyChecking accept-new\n"
    )


def test_fallback_config_with_an_explicit_file_includes_only_it() -> None:
    # As with `ssh -F FILE`: neither ~/.ssh/config nor /etc/ssh/ssh_config.
    assert fallback_config_text("/etc/remote acp/ssh_config", home="/home/u") == (
        "# Written by remote-acp: the ssh_config ssh would read, then our default host-key policy.\n"
        'Include "/etc/remote acp/ssh_config"\n'
        "Host *\n"
        "  StrictHostKeyChecking accept-new\n"
    )
    assert fallback_config_text("none", home="/home/u") == (
        "# Written by remote-acp: the ssh_config ssh would read, then our default host-key policy.\n"
        "Host *\n"
        "  StrictHostKeyChecking accept-new\n"
    )


def test_fallback_config_escapes_paths_for_the_parser_and_for_glob() -> None:
    text = fallback_config_text('/c/it\'s "dq" * ? [x] back\\slash #h $v %p ~t', home="/h")
    assert text.split("\n")[1] == 'Include "/c/it\\\'s \\"dq\\" \\\\* \\\\? \\\\[x] back\\\\\\\\slash #h $v %p ~t"'


HOSTILE_CONFIG_DIRS = ["sp ace", "q'uote", 'd"q', "ha#sh", "st*ar", "back\\slash", "br[ack]et", "que?y", "$v %p ~t"]
SSH_G_CASES = [("strict", "ask"), ("insecure", "no"), ("off", "no"), ("sure", "yes"), ("plain", "accept-new")]


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs OpenSSH's ssh")
def test_real_ssh_reads_the_users_policy_first_and_ours_as_the_fallback(tmp_path: Path) -> None:
    ssh = shutil.which("ssh")
    assert ssh is not None
    user = tmp_path / "user_config"
    user.write_text(
        "Host strict\n  StrictHostKeyChecking ask\n"
        "Host insecure\n  StrictHostKeyChecking no\n"
        "Host off\n  StrictHostKeyChecking off\n"
        "Host sure\n  StrictHostKeyChecking yes\n"
        "Host *\n  User from-user-config\n"
    )
    config = write_fallback_config(fallback_config_text(str(user), home="/nonexistent"), tmp_path / "cache")
    for host, policy in SSH_G_CASES:
        seen = anyio.run(effective_host_key_policy, ssh, Destination(host), str(config), {"PATH": os.defpath})
        assert seen == policy, host
    done = subprocess.run([ssh, "-G", "-F", str(config), "plain"], capture_output=True, text=True, check=True)
    assert "user from-user-config" in done.stdout.splitlines()


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs OpenSSH's ssh")
def test_real_ssh_includes_exactly_the_named_file_whatever_its_path(tmp_path: Path) -> None:
    ssh = shutil.which("ssh")
    assert ssh is not None
    decoy = tmp_path / "stXar"  # what `st*ar` would match as a glob
    decoy.mkdir()
    (decoy / "config").write_text("Host *\n  User decoy\n")
    for name in HOSTILE_CONFIG_DIRS:
        (tmp_path / name).mkdir()
        (tmp_path / name / "config").write_text("Host *\n  User included\n")
        config = write_fallback_config(fallback_config_text(str(tmp_path / name / "config"), home="/h"), tmp_path / "c")
        done = subprocess.run([ssh, "-G", "-F", str(config), "h"], capture_output=True, text=True, check=True)
        assert "user included" in done.stdout.splitlines(), name
    (tmp_path / "st*ar" / "config").unlink()
    config = write_fallback_config(fallback_config_text(str(tmp_path / "st*ar" / "config"), home="/h"), tmp_path / "c")
    done = subprocess.run([ssh, "-G", "-F", str(config), "h"], capture_output=True, text=True, check=True)
    assert "user decoy" not in done.stdout.splitlines()


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs OpenSSH's ssh")
def test_real_ssh_reads_the_users_config_under_the_login_home(tmp_path: Path) -> None:
    ssh = shutil.which("ssh")
    assert ssh is not None
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text("Host build\n  StrictHostKeyChecking ask\n")
    config = write_fallback_config(fallback_config_text(None, home=str(tmp_path)), tmp_path / "cache")
    for host, policy in [("build", "ask"), ("other", "accept-new")]:
        assert anyio.run(effective_host_key_policy, ssh, Destination(host), str(config), {"PATH": os.defpath}) == policy


def test_effective_host_key_policy_reads_ssh_g_spellings(tmp_path: Path) -> None:
    for printed, policy in [
        ("stricthostkeychecking true\n", "yes"),
        ("stricthostkeychecking false\n", "no"),
        ("stricthostkeychecking off\n", "no"),
        ("stricthostkeychecking ask\n", "ask"),
        ("stricthostkeychecking accept-new\n", "accept-new"),
        ("user root\n", None),
    ]:
        ssh = fake_ssh(tmp_path / "bin", printed)
        environ = environ_with(tmp_path / "bin")
        seen = anyio.run(effective_host_key_policy, str(ssh), Destination("b", 22), "/cfg", environ)
        assert seen == policy, printed
    lines = (tmp_path / "bin" / "ssh-argv.log").read_text().split("\n")
    assert lines[:7] == ["-F", "/cfg", "-G", "-p", "22", "--", "b"]


def test_fallback_config_is_written_once_under_its_content_address(tmp_path: Path) -> None:
    directory = tmp_path / "cache dir" / "ssh"
    text = fallback_config_text(None, home="/home/u")
    path = write_fallback_config(text, directory)
    assert path == directory / f"config-{hashlib.sha256(text.encode()).hexdigest()[:32]}"
    assert path.read_text() == text
    assert directory.stat().st_mode & 0o777 == 0o700
    assert path.stat().st_mode & 0o777 == 0o600
    before = path.stat()
    assert write_fallback_config(text, directory) == path
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # not rewritten
    other = write_fallback_config(fallback_config_text("none", home="/home/u"), directory)
    assert other != path
    assert sorted(p.name for p in directory.iterdir()) == sorted([path.name, other.name])  # no temporaries left


def test_fallback_config_with_the_wrong_content_is_replaced(tmp_path: Path) -> None:
    text = fallback_config_text(None, home="/home/u")
    path = write_fallback_config(text, tmp_path / "ssh")
    path.write_text("Host *\n  ProxyCommand touch /tmp/pwned\n")
    assert write_fallback_config(text, tmp_path / "ssh") == path
    assert path.read_text() == text


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o777])
def test_fallback_config_directory_must_be_private(tmp_path: Path, mode: int) -> None:
    directory = tmp_path / "ssh"
    directory.mkdir()
    directory.chmod(mode)
    with raises_kind(ErrorKind.AGENT_NOT_FOUND) as info:
        write_fallback_config("x\n", directory)
    assert info.value.message == (
        f"the directory {directory} is not private to this user: remote-acp keeps ssh configs there "
        "(set REMOTE_ACP_CACHE_DIR to another directory)"
    )
    assert list(directory.iterdir()) == []


def test_fallback_config_dir_comes_from_the_environment_or_platformdirs(monkeypatch: pytest.MonkeyPatch) -> None:
    import platformdirs

    monkeypatch.setenv("REMOTE_ACP_CACHE_DIR", "/somewhere/else")
    assert str(fallback_config_dir()) == "/somewhere/else/ssh"
    monkeypatch.delenv("REMOTE_ACP_CACHE_DIR")
    assert fallback_config_dir() == platformdirs.user_cache_path("remote-acp") / "ssh"


# -- SshSettings --------------------------------------------------------------------------------


def test_settings_defaults() -> None:
    settings = SshSettings()
    assert settings.host_key_policy is None
    assert settings.force_insecure_host_keys is False
    assert settings.config_file is None
    assert settings.connect_timeout_s == 10
    assert (settings.server_alive_interval_s, settings.server_alive_count_max) == (15, 3)
    assert settings.pass_env == ()
    assert settings.kill_grace_s == 3


def test_settings_refuse_policy_no_unless_forced() -> None:
    with pytest.raises(ValueError) as info:
        SshSettings(host_key_policy="no")
    assert str(info.value) == (
        "host key policy 'no' connects even to a host whose key changed; set force_insecure_host_keys to use it anyway"
    )
    assert SshSettings(host_key_policy="no", force_insecure_host_keys=True).host_key_policy == "no"
    assert SshSettings(host_key_policy="yes").host_key_policy == "yes"
    assert SshSettings(host_key_policy="accept-new").host_key_policy == "accept-new"


@pytest.mark.parametrize("policy", ["ask", "off", "false", "", "YES", "accept_new"])
def test_settings_refuse_an_unknown_policy(policy: str) -> None:
    with pytest.raises(ValueError) as info:
        SshSettings(host_key_policy=policy)  # type: ignore[arg-type]
    assert str(info.value) == "host_key_policy must be one of accept-new, yes, no"


@pytest.mark.parametrize("path", ["", "/etc/a\nHost *", "/etc/a\r", "/etc/\0a"])
def test_settings_refuse_a_config_file_that_cannot_be_one_ssh_config_word(path: str) -> None:
    with pytest.raises(ValueError) as info:
        SshSettings(config_file=path)
    assert str(info.value) == "config_file must be a non-empty path without line breaks"


BOUNDED_FIELDS = ["connect_timeout_s", "server_alive_interval_s", "server_alive_count_max", "kill_grace_s"]


@pytest.mark.parametrize("field", BOUNDED_FIELDS)
@pytest.mark.parametrize("value", [0, -1, -3600])
def test_settings_refuse_bounds_below_one(field: str, value: int) -> None:
    with pytest.raises(ValueError) as info:
        SshSettings(**{field: value})  # type: ignore[arg-type]
    assert str(info.value) == f"{field} must be at least 1"
    assert getattr(SshSettings(**{field: 1}), field) == 1  # type: ignore[arg-type]


@pytest.mark.parametrize("field", BOUNDED_FIELDS)
@pytest.mark.parametrize(
    ("value", "kind"),
    [(2.5, "float"), (3.0, "float"), (True, "bool"), (False, "bool"), ("3", "str"), (None, "NoneType")],
)
def test_settings_refuse_numbers_that_are_not_ints(field: str, value: object, kind: str) -> None:
    # 2.5 would reach the remote shell as `[ "$_ra_n" -lt 2.5 ]`; True would read as 1.
    with pytest.raises(ValueError) as info:
        SshSettings(**{field: value})  # type: ignore[arg-type]
    assert str(info.value) == f"{field} must be an integer, not {kind}"


def test_remote_script_refuses_a_grace_that_is_not_a_whole_count_and_an_odd_token() -> None:
    for grace, message in [
        (2.5, "kill_grace_s must be an integer, not float"),
        (True, "kill_grace_s must be an integer, not bool"),
        (0, "kill_grace_s must be at least 1"),
    ]:
        with pytest.raises(ValueError) as info:
            remote_script("/w", ["agent"], kill_grace_s=grace)  # type: ignore[arg-type]
        assert str(info.value) == message
    for token in ["", "a.b", "a b", "x'y", "ünï", "a\\."]:
        with pytest.raises(ValueError, match="the session token must be ASCII letters and digits"):
            remote_script("/w", ["agent"], token=token)


@pytest.mark.parametrize(
    ("names", "index"),
    [
        (("1BAD",), 0),
        (("GOOD", "A-B"), 1),
        (("GOOD", "OTHER", ""), 2),
        (("A B",), 0),
        (("X\n",), 0),
        (("_RA_SESSION",), 0),
        (("OK", "_RA_COMPLETE"), 1),
        (("sk-live-0123456789abcdef",), 0),
        (("API_KEY=sk-live-0123456789abcdef",), 0),
        (("ÜBER",), 0),
        (("$HOME",), 0),
        (("_ra_agent",), 0),  # the supervisor's own variables, in any case
        (("OK", "_Ra_X"), 1),
    ],
)
def test_settings_refuse_invalid_pass_env_names_by_position(names: tuple[str, ...], index: int) -> None:
    with pytest.raises(ValueError) as info:
        SshSettings(pass_env=names)
    message = str(info.value)
    assert message == f"ssh_pass_env entry {index} is not a valid environment variable name"
    bad = names[index]
    assert not bad or bad.strip() not in message  # the text could be a secret: never echoed


RESERVED_NAMES = ["IFS", "PPID", "UID", "EUID", "SHELLOPTS", "BASHOPTS", "BASH_VERSINFO", "FUNCNEST", "GLOBIGNORE"]


@pytest.mark.parametrize("name", [*RESERVED_NAMES, "EXECIGNORE"])
def test_settings_refuse_names_the_remote_shell_needs_by_position(name: str) -> None:
    with pytest.raises(ValueError) as info:
        SshSettings(pass_env=("API_KEY", "PATH", name))
    assert str(info.value) == "ssh_pass_env entry 2 names a variable the remote shell needs for itself"


def test_settings_accept_valid_pass_env_names() -> None:
    names = ("API_KEY", "_", "a1", "_private", "RA_OK", "_RA", "lower_case", "PATH", "HOME", "ifs", "LANG")
    assert SshSettings(pass_env=names).pass_env == names


def test_ifs_or_ppid_from_the_environment_would_break_the_supervisor() -> None:
    # Why IFS and PPID are reserved: imported ahead of the supervisor, they change how it splits
    # words and whom it takes for the connection. (Shown with dash, which lets PPID be assigned.)
    probe = 'set -- $(echo "1 2 3"); echo "$# $PPID"'
    plain = subprocess.run(["sh", "-c", probe], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    assert plain.stdout.split()[0] == "3"
    preamble = env_preamble({"IFS": ",", "PPID": "1"}).decode()
    spoiled = subprocess.run(
        ["dash" if shutil.which("dash") else "sh", "-c", f"{preamble}{probe}"],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert spoiled.stdout.split()[0] == "1"  # the words no longer split


# -- env_preamble -------------------------------------------------------------------------------


def test_env_preamble_empty_is_one_padded_block() -> None:
    preamble = env_preamble({})
    assert preamble == b"_RA_COMPLETE=1" + b" " * 49 + b"\n"
    assert len(preamble) == 64


def test_env_preamble_exact_bytes() -> None:
    assert env_preamble({"A": "x", "B": "it's"}) == (b"export A=x B='it'\"'\"'s'; _RA_COMPLETE=1" + b" " * 24 + b"\n")


def test_env_preamble_is_padded_to_whole_blocks_with_least_padding() -> None:
    for size in [*range(1, 200), 1000, 4095, 4096]:
        preamble = env_preamble({"A": "x" * size})
        assert len(preamble) % 64 == 0, size
        assert preamble.endswith(b"\n")
        assert preamble.count(b"\n") == 1
        body = preamble.rstrip(b" \n")
        assert body == b"export A=" + b"x" * size + b"; _RA_COMPLETE=1"
        assert len(preamble) - len(body) - 1 < 64, size  # never a whole block of padding
        assert set(preamble[len(body) : -1]) <= {ord(" ")}


def test_env_preamble_body_of_63_bytes_needs_no_padding() -> None:
    # "export A=" + value + "; _RA_COMPLETE=1" is 25 bytes plus the value; 63 + newline = 64.
    assert env_preamble({"A": "x" * 38}) == b"export A=" + b"x" * 38 + b"; _RA_COMPLETE=1\n"
    assert len(env_preamble({"A": "x" * 39})) == 128


def test_env_preamble_pads_by_bytes_not_characters() -> None:
    for count in range(1, 70):
        preamble = env_preamble({"U": "ü✓" * count})
        assert len(preamble) % 64 == 0
        assert preamble.endswith(b"\n")


def test_env_preamble_quotes_values() -> None:
    preamble = env_preamble(ENV_VALUES).decode()
    for name, value in ENV_VALUES.items():
        assert f"{name}={shlex.quote(value)}" in preamble
    assert preamble.index("QUOTED=") < preamble.index("DOLLAR=") < preamble.index("SEMI=")  # order kept
    assert preamble.startswith("export ")
    assert preamble.rstrip().endswith("; _RA_COMPLETE=1")
    assert "'$HOME ${PATH} `id` $(id) \\$x'" in preamble  # single-quoted: nothing expands


def test_env_preamble_carries_values_that_are_not_utf8_as_their_bytes() -> None:
    raw = b"tok\xffen \xc3( 'q' \x80"
    value = os.fsdecode(raw)  # what os.environ holds for undecodable bytes: surrogate escapes
    preamble = env_preamble({"RAW": value, "OK": "ü"})
    assert len(preamble) % 64 == 0
    assert preamble.startswith(b"export RAW='tok\xffen \xc3( '\"'\"'q'\"'\"' \x80' OK='\xc3\xbc'; _RA_COMPLETE=1")
    reader = f"{sys.executable} -c 'import os,sys; sys.stdout.buffer.write(os.environb[b\"RAW\"])'"
    for shell in shells():
        done = subprocess.run(
            [*shell, "-c", preamble + b"exec " + reader.encode()],
            capture_output=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
        assert (done.returncode, done.stdout) == (0, raw), (shell, done.stderr)


def test_env_preamble_evaluates_in_sh_to_exported_values() -> None:
    preamble = env_preamble(ENV_VALUES).decode()
    reader = f"{sys.executable} -c 'import os,json; print(json.dumps(dict(os.environ)))'"
    script = f'{preamble}[ "$_RA_COMPLETE" = 1 ] || exit 9\nexec {reader}\n'
    for shell in shells():
        done = subprocess.run([*shell, "-c", script], capture_output=True, timeout=RUN_TIMEOUT_S, check=False)
        assert done.returncode == 0, (shell, done.stderr)
        seen = json.loads(done.stdout)
        assert {name: seen.get(name) for name in ENV_VALUES} == ENV_VALUES, shell
        assert "_RA_COMPLETE" not in seen  # a plain assignment, not exported


# -- remote_script as data ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "workspace",
    [
        "/srv/my workspace",
        "/srv/it's",
        '/srv/"dq"',
        "/srv/$HOME",
        "/srv/a;b",
        "/srv/-x",
        "/srv/*",
        "/srv/ws",
        "/" + HOSTILE_DIR,
    ],
)
def test_remote_script_enters_the_quoted_workspace_with_cd_dash_dash_first(workspace: str) -> None:
    script = remote_script(workspace, ["agent"], token="t0")
    head = script[: script.index(" 2>/dev/null || { printf ")]
    assert head == f"cd -- {shlex.quote(workspace)}"
    if any(c in workspace for c in " '\"$;*\n\\`"):
        assert head.startswith("cd -- '")  # single-quoted: nothing in it expands
    # Tokenised as a shell would, the words are exactly `cd`, `--` and the workspace.
    assert shlex.split(head) == ["cd", "--", workspace]
    # The failure branch exits before anything else in the script.
    assert script.index("exit 97; }\n") < script.index("_ra_tree() {")


def test_remote_script_with_a_plain_workspace_is_cd_then_supervisor() -> None:
    script = remote_script("/srv/ws dir", ["agent", "--acp"], token="abc123", kill_grace_s=5)
    lines = script.split("\n")
    assert lines[0] == (
        "cd -- '/srv/ws dir' 2>/dev/null || "
        "{ printf '%s\\n' 'remote-acp: workspace unavailable: /srv/ws dir' >&2; exit 97; }"
    )
    assert "dd " not in script and "_RA_ENV" not in script  # no environment, no preamble reader
    assert line_after_session_mark(script) == ["exec agent --acp"]
    assert "{ export _RA_SESSION=abc123." in lines
    assert 'grep -l -s -a "_RA_SESSION=abc123\\."' in script
    assert 'while [ "$_ra_n" -lt 5 ]; do' in script
    assert script.rstrip().endswith('exit "$_ra_rc"')
    assert "__" not in script.replace("__pycache__", "")  # every placeholder filled


def test_remote_script_list_command_is_quoted_word_by_word() -> None:
    command = ["/opt/my agent/bin/agent", *HOSTILE_WORDS]
    script = remote_script("/w", command, token="t")
    fragment = "\n".join(line_after_session_mark(script))
    assert fragment == "exec " + shlex.join(command)
    assert shlex.split(fragment) == ["exec", *command]


def test_remote_script_string_command_goes_verbatim() -> None:
    for command in ["echo a && echo b", "FOO=1 exec agent --acp 2>>log", "if true; then\n  agent\nfi", "a | b; c"]:
        script = remote_script("/w", f"  {command}\n ", token="t")
        assert line_after_session_mark(script) == command.split("\n")


def test_remote_script_list_command_that_looks_like_a_fragment_stays_one_word() -> None:
    script = remote_script("/w", ["echo hi && touch pwned"], token="t")
    assert line_after_session_mark(script) == ["exec 'echo hi && touch pwned'"]


def test_remote_script_refuses_an_empty_list_command() -> None:
    with raises_kind(ErrorKind.AGENT_NOT_FOUND):
        remote_script("/w", [])
    with raises_kind(ErrorKind.AGENT_NOT_FOUND):
        remote_script("/w", ["", "x"])


def test_remote_script_reads_exactly_the_preamble_bytes() -> None:
    script = remote_script("/w", ["agent"], 128, token="t")
    lines = script.split("\n")
    assert lines[1].startswith("command -v dd >/dev/null 2>&1 || {")
    assert lines[1].endswith("exit 98; }")
    assert lines[2].startswith('_RA_ENV=$(dd bs=1 count=128 2>/dev/null) && command eval "$_RA_ENV" && ')
    assert lines[2].endswith(f"{{ echo '{ENV_MESSAGE}' >&2; exit 98; }}")
    assert lines[3] == "unset _RA_ENV _RA_COMPLETE"


def test_remote_script_token_is_random_by_default() -> None:
    tokens = {re.findall(r"_RA_SESSION=([0-9a-f]+)\.\n", remote_script("/w", ["a"]))[0] for _ in range(20)}
    assert len(tokens) == 20
    assert all(len(token) == 16 for token in tokens)


@pytest.mark.parametrize("shell", shells(), ids=lambda shell: "-".join(shell))
def test_remote_script_is_valid_posix_sh(shell: list[str]) -> None:
    commands: list[str | list[str]] = [
        [sys.executable, "-c", PRINT_CWD_AND_ARGS, *HOSTILE_WORDS],
        ["agent"],
        "echo a && echo b",
        "if true; then\n  exec agent --acp\nfi",
        "exit 7",
    ]
    for workspace in ["/srv/ws", "/" + HOSTILE_DIR]:
        for command in commands:
            for env_bytes in (0, 64, 4096):
                script = remote_script(workspace, command, env_bytes, kill_grace_s=2)
                done = subprocess.run([*shell, "-n", "-c", script], capture_output=True, timeout=RUN_TIMEOUT_S)
                assert done.returncode == 0, (workspace, command, env_bytes, done.stderr)
                assert done.stdout == b"", done.stdout


# -- remote_script, run locally -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Case:
    argv: tuple[str, ...]
    stdin: bytes = b""


@dataclass(frozen=True, slots=True)
class Ran:
    code: int
    out: bytes
    err: str


@dataclass(frozen=True, slots=True)
class Runs:
    root: Path
    results: Mapping[str, Ran]

    def __getitem__(self, name: str) -> Ran:
        return self.results[name]


def _run(case: Case, env: Mapping[str, str]) -> Ran:
    proc = subprocess.Popen(
        case.argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env),
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(case.stdin, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return Ran(proc.returncode, out, err.decode(errors="replace"))


def _cases(root: Path) -> dict[str, Case]:
    hostile = root / HOSTILE_DIR
    hostile.mkdir()
    missing = root / "missing -dir 'q' \"dq\" $x; y"
    a_file = root / "plain-file"
    a_file.write_text("not a directory\n")
    preamble = env_preamble(ENV_VALUES)
    py = sys.executable

    def sh(script: str, stdin: bytes = b"", shell: str = "sh") -> Case:
        return Case((shell, "-c", script), stdin)

    hostile_command = [py, "-c", PRINT_CWD_AND_ARGS, *HOSTILE_WORDS]
    hostile_script = remote_script(str(hostile), hostile_command, token="tokhostile")
    # Every script running at once needs its own session token: a finished script's cleanup kills
    # whatever carries its token (in real use tokens are random).
    via_ssh = ssh_argv(
        "ssh",
        Destination("build"),
        SshSettings(),
        remote_script(str(hostile), hostile_command, token="tokhostilelogin"),
        config="/c",
    )
    env_script = remote_script(str(hostile), [py, "-c", PRINT_ENV_AND_STDIN], len(preamble), token="tokenv")
    cases = {
        "hostile": sh(hostile_script),
        "hostile_via_login_shell": sh(via_ssh[-1]),
        "missing_string": sh(remote_script(str(missing), f"touch {shlex.quote(str(root / 'ran-string'))}")),
        "missing_list": sh(remote_script(str(missing), [py, "-c", f"open({str(root / 'ran-list')!r}, 'w')"])),
        "missing_with_env": sh(
            remote_script(str(missing), f"touch {shlex.quote(str(root / 'ran-env'))}", len(preamble)), preamble
        ),
        "file_workspace": sh(remote_script(str(a_file), f"touch {shlex.quote(str(root / 'ran-file'))}")),
        "fragment": sh(remote_script(str(hostile), "echo a && echo b")),
        "fragment_pipeline": sh(remote_script(str(root), "printf '%s\\n' one two three | sort -r; echo \"$PWD\"")),
        "env": sh(env_script, preamble + STDIN_REST),
        "env_cat": sh(remote_script(str(root), "cat", len(preamble)), preamble + STDIN_REST),
        "env_cut_in_name": sh(env_script, preamble[:5]),
        "env_empty_stdin": sh(env_script, b""),
        "env_cut_before_complete": sh(env_script, preamble[: preamble.index(b"; _RA_COMPLETE")]),
        "exit_7": sh(remote_script(str(root), "exit 7")),
        "exit_7_list": sh(remote_script(str(root), [py, "-c", "raise SystemExit(7)"])),
        "not_found": sh(remote_script(str(root), ["remote-acp-no-such-program-xyz", "--acp"])),
        "killed_9": sh(remote_script(str(root), ["sh", "-c", "kill -KILL $$"])),
        "killed_15": sh(remote_script(str(root), ["sh", "-c", "kill -TERM $$"])),
        "placeholders": sh(remote_script(str(root), ["printf", "%s\\n", *PLACEHOLDER_WORDS], token="tokph")),
        "backslash_workspace": sh(remote_script(str(root / "no\\cwhere"), "true")),
    }
    if shutil.which("dash"):
        # Cut inside a quoted value: dash treats the syntax error in `eval` as fatal to the shell.
        cut = preamble.index(b"QUOTED='") + len(b"QUOTED='it")
        cases["env_cut_in_quote_dash"] = sh(env_script, preamble[:cut], shell="dash")
    return cases


PLACEHOLDER_WORDS = ["__TOKEN__", "__GRACE__", "__SIGNAL_MARK__", "__COMMAND__"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    """Run every script case at once (each takes up to a second of watchdog polling), then check
    that none of them, nor anything they started, is still alive."""
    root = tmp_path_factory.mktemp("remote script")
    cases = _cases(root)
    marker = f"ssh-build-{uuid.uuid4().hex}"
    env = {**os.environ, MARKER_NAME: marker}
    try:
        with ThreadPoolExecutor(max_workers=len(cases)) as pool:
            futures = {name: pool.submit(_run, case, env) for name, case in cases.items()}
            results = {name: future.result() for name, future in futures.items()}
    finally:
        leftovers = kill_marked(marker)
    assert not leftovers, f"script processes outlived their run: {leftovers}"
    yield Runs(root, results)


def test_hostile_workspace_and_words_arrive_intact(runs: Runs) -> None:
    ran = runs["hostile"]
    assert (ran.code, ran.err) == (0, "")
    cwd, args = json.loads(ran.out)
    assert cwd == str(runs.root / HOSTILE_DIR)
    assert args == HOSTILE_WORDS
    assert not (runs.root / HOSTILE_DIR / "pwned").exists()


def test_hostile_script_survives_the_remote_login_shell(runs: Runs) -> None:
    assert runs["hostile_via_login_shell"] == runs["hostile"]


@pytest.mark.parametrize(("case", "ran_marker"), [("missing_string", "ran-string"), ("missing_list", "ran-list")])
def test_missing_workspace_exits_97_and_never_runs_the_command(runs: Runs, case: str, ran_marker: str) -> None:
    ran = runs[case]
    missing = runs.root / "missing -dir 'q' \"dq\" $x; y"
    assert ran.code == 97
    assert ran.out == b""
    assert ran.err == f"{WORKSPACE_MARK} {missing}\n"
    assert not (runs.root / ran_marker).exists()


def test_missing_workspace_exits_97_before_reading_the_environment(runs: Runs) -> None:
    ran = runs["missing_with_env"]
    assert ran.code == 97
    assert ran.err.startswith(WORKSPACE_MARK)
    assert ENV_MESSAGE not in ran.err
    assert not (runs.root / "ran-env").exists()


def test_workspace_that_is_a_file_exits_97(runs: Runs) -> None:
    ran = runs["file_workspace"]
    assert (ran.code, ran.out) == (97, b"")
    assert ran.err == f"{WORKSPACE_MARK} {runs.root / 'plain-file'}\n"
    assert not (runs.root / "ran-file").exists()


def test_missing_workspace_message_keeps_backslashes(runs: Runs) -> None:
    ran = runs["backslash_workspace"]
    assert ran.code == 97
    where = runs.root / "no\\cwhere"
    assert ran.err == f"{WORKSPACE_MARK} {where}\n"


def test_string_fragment_runs_verbatim_in_the_workspace(runs: Runs) -> None:
    assert runs["fragment"] == Ran(0, b"a\nb\n", "")
    assert runs["fragment_pipeline"] == Ran(0, f"two\nthree\none\n{runs.root}\n".encode(), "")


def test_environment_is_imported_and_the_rest_of_stdin_reaches_the_command(runs: Runs) -> None:
    ran = runs["env"]
    assert (ran.code, ran.err) == (0, "")
    seen = json.loads(ran.out)
    assert {name: seen["env"].get(name) for name in ENV_VALUES} == ENV_VALUES
    assert bytes.fromhex(seen["stdin"]) == STDIN_REST
    assert seen["env"]["_RA_SESSION"] == "tokenv."
    assert "_RA_ENV" not in seen["env"]
    assert "_RA_COMPLETE" not in seen["env"]


def test_environment_preamble_then_cat_passes_stdin_through_byte_for_byte(runs: Runs) -> None:
    assert runs["env_cat"] == Ran(0, STDIN_REST, "")


@pytest.mark.parametrize("case", ["env_cut_in_name", "env_empty_stdin", "env_cut_before_complete"])
def test_cut_short_preamble_exits_98_with_a_clear_message(runs: Runs, case: str) -> None:
    ran = runs[case]
    assert ran.code == 98
    assert ran.out == b""
    assert ran.err.rstrip("\n").endswith(ENV_MESSAGE)
    for value in ENV_VALUES.values():  # a value never echoed back in the message
        if len(value) > 3:
            assert value not in ran.err


def test_preamble_cut_inside_a_quote_exits_98_under_dash(runs: Runs) -> None:
    if "env_cut_in_quote_dash" not in runs.results:
        pytest.skip("dash is not installed")
    ran = runs["env_cut_in_quote_dash"]
    assert ran.code == 98
    assert ENV_MESSAGE in ran.err


@pytest.mark.parametrize("case", ["exit_7", "exit_7_list"])
def test_exit_status_is_propagated(runs: Runs, case: str) -> None:
    assert runs[case] == Ran(7, b"", "")


def test_missing_program_exits_127_with_the_shell_message(runs: Runs) -> None:
    ran = runs["not_found"]
    assert ran.code == 127
    assert "remote-acp-no-such-program-xyz" in ran.err
    assert "not found" in ran.err
    assert SIGNAL_MARK not in ran.err


@pytest.mark.parametrize(("case", "signum"), [("killed_9", 9), ("killed_15", 15)])
def test_command_killed_by_a_signal_exits_128_plus_n_with_the_mark(runs: Runs, case: str, signum: int) -> None:
    ran = runs[case]
    assert ran.code == 128 + signum
    assert ran.out == b""
    # The mark is the last line (the shell may first say "Killed" or "Terminated" itself).
    assert ran.err.splitlines()[-1] == f"{SIGNAL_MARK} {signum}"


def test_template_placeholders_in_a_command_arrive_intact(runs: Runs) -> None:
    ran = runs["placeholders"]
    assert ran.code == 0
    assert ran.out.decode().splitlines() == PLACEHOLDER_WORDS


# -- the supervisor, run locally: what it signals, and when -------------------------------------

# The agent: records its PID; starts short-lived children (like tool calls) that exit long before
# any kill; then long-lived ones: a `setsid` child (left the group), and one with a cleared
# environment (no session token, found only through the tree). On SIGTERM it survives and starts
# one more token-less child, which only a kill set computed at SIGKILL time can know about.
# With "exit" it exits 3 instead, leaving its setsid child behind.
AGENT_SH = r"""
d=$1
echo $$ > "$d/agent"
trap 'env -i "REMOTE_ACP_TEST_MARK=$REMOTE_ACP_TEST_MARK" sleep 600 & echo $! > "$d/late"' TERM
i=0
while [ $i -lt 6 ]; do sleep 0.1 & echo $! >> "$d/short"; wait $!; i=$((i + 1)); done
setsid sleep 600 & echo $! > "$d/setsid"
if [ "$2" = exit ]; then echo ready > "$d/ready"; exit 3; fi
env -i "REMOTE_ACP_TEST_MARK=$REMOTE_ACP_TEST_MARK" sleep 600 & echo $! > "$d/envless"
echo ready > "$d/ready"
while :; do sleep 0.2; done
"""
# The agent becomes (same PID) a program whose name reads like fields of /proc/PID/stat.
ODD_AGENT_SH = 'echo $$ > "$1/agent"; echo ready > "$1/ready"; exec "$0" 600'
# Logs every signal the supervisor sends (a function named kill comes before the builtin), with
# W for the watchdog and the agent's status for the shell's cleanup after `wait` reaped it.
KILL_LOGGER = """kill() {
  case "$1" in -TERM|-KILL) echo "${_ra_rc-W} $*" >> __LOG__ ;; esac
  command kill "$@"
}
"""
PROC_DETECTION = 'if [ -r "/proc/$$/stat" ]; then _ra_proc=1; else _ra_proc=; fi'
LONG_LIVED = ("agent", "setsid", "envless", "late")


@dataclass(frozen=True, slots=True)
class Supervised:
    pids: Mapping[str, list[int]]
    kills: list[tuple[str, str, list[int]]]
    """(who, signal, pids): who is W (the watchdog) or the agent's exit status (the shell)."""
    survivors: list[str]
    code: int | None
    seconds: float
    """From the connection loss (or the start) until every long-lived process was gone."""


def _wait_for(path: Path, deadline: float) -> None:
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.02)


def _supervise(
    root: Path,
    name: str,
    env: Mapping[str, str],
    *,
    lose_connection: bool,
    agent: str | list[str] | None = None,
    proc: bool = True,
    path_first: Path | None = None,
    shell: str = "sh",
) -> Supervised:
    """Run the supervisor under a stand-in for the per-connection sshd; with ``lose_connection``,
    SIGKILL the stand-in once the agent is ready, as when the connection goes."""
    d = root / name
    d.mkdir()
    log = d / "kills"
    script = remote_script(
        str(d), agent or ["sh", "-c", AGENT_SH, "agent", str(d)], kill_grace_s=2, token=f"tok{name.replace('_', '')}"
    )
    if not proc:
        assert script.count(PROC_DETECTION) == 1
        script = script.replace(PROC_DETECTION, "_ra_proc=")
    script = KILL_LOGGER.replace("__LOG__", shlex.quote(str(log))) + script
    env = dict(env)
    if path_first is not None:
        env["PATH"] = f"{path_first}:{env['PATH']}"
    standin = subprocess.Popen(
        ["sh", "-c", f'{shell} -c "$0" & echo $!; wait "$!"; echo "$?"', script],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, start_new_session=True,
    )  # fmt: skip
    assert standin.stdout is not None
    code: int | None = None
    try:
        script_shell = int(standin.stdout.readline())
        deadline = time.monotonic() + RUN_TIMEOUT_S
        _wait_for(d / "ready", deadline)
        if lose_connection:
            time.sleep(0.3)
            standin.kill()
            standin.wait()
        started = time.monotonic()
        if not lose_connection:
            code = int(standin.stdout.readline())
            standin.wait()
        while alive(script_shell) and time.monotonic() < deadline:
            time.sleep(0.02)
        pids = {
            p.name: [int(w) for w in p.read_text().split()] for p in d.iterdir() if p.name in (*LONG_LIVED, "short")
        }
        watched = [pid for what in LONG_LIVED for pid in pids.get(what, [])]
        while any(alive(pid) for pid in watched) and time.monotonic() < deadline:
            time.sleep(0.02)
        seconds = time.monotonic() - started
        survivors = [f"{what} {pid}" for what in LONG_LIVED for pid in pids.get(what, []) if alive(pid)]
    finally:
        if standin.poll() is None:
            os.killpg(standin.pid, signal.SIGKILL)
            standin.wait()
        standin.stdout.close()
    kills = []
    for line in log.read_text().splitlines() if log.exists() else []:
        who, sig, *words = line.split()
        kills.append((who, sig, [int(w) for w in words]))
    return Supervised(pids, kills, survivors, code, seconds)


@pytest.fixture(scope="module")
def supervised(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mapping[str, Supervised]]:
    """Every supervisor scenario at once (each takes a few seconds of polling and grace)."""
    root = tmp_path_factory.mktemp("supervised")
    marker = f"ssh-supervise-{uuid.uuid4().hex}"
    env = {**os.environ, MARKER_NAME: marker}
    no_ps = root / "no-ps"  # a ps that cannot report anything, as BusyBox's cannot do `-o ppid= -p`
    no_ps.mkdir()
    (no_ps / "ps").write_text("#!/bin/sh\necho 'ps: invalid option' >&2\nexit 1\n")
    (no_ps / "ps").chmod(0o755)
    oddly = root / "odd-name"  # a program whose name breaks naive parsing of /proc/PID/stat
    oddly.mkdir()
    (oddly / "sl) S 1 2 (p").symlink_to(shutil.which("sleep") or "/bin/sleep")
    run = partial(_supervise, root, env=env)
    scenarios: dict[str, Callable[[], Supervised]] = {
        "lost": partial(run, "lost", lose_connection=True),
        "lost_without_ps": partial(run, "lost_without_ps", lose_connection=True, path_first=no_ps),
        "lost_without_proc": partial(run, "lost_without_proc", lose_connection=True, proc=False),
        "lost_odd_name": partial(
            run,
            "lost_odd_name",
            lose_connection=True,
            agent=["sh", "-c", ODD_AGENT_SH, str(oddly / "sl) S 1 2 (p"), str(root / "lost_odd_name")],
        ),
        "exits": partial(
            run, "exits", lose_connection=False, agent=["sh", "-c", AGENT_SH, "agent", str(root / "exits"), "exit"]
        ),
    }
    if shutil.which("bash"):  # /bin/sh on some hosts: it keeps a subshell around a fragment's last command
        scenarios["lost_bash"] = partial(run, "lost_bash", lose_connection=True, shell="bash --posix")
        scenarios["lost_bash_fragment"] = partial(
            run,
            "lost_bash_fragment",
            lose_connection=True,
            shell="bash --posix",
            agent=shlex.join(["sh", "-c", AGENT_SH, "agent", str(root / "lost_bash_fragment")]),
        )
    try:
        with ThreadPoolExecutor(max_workers=len(scenarios)) as pool:
            futures = {name: pool.submit(scenario) for name, scenario in scenarios.items()}
            results = {name: future.result() for name, future in futures.items()}
    finally:
        leftovers = kill_marked(marker)
    assert not leftovers, f"supervised processes outlived their run: {leftovers}"
    yield results


@pytest.mark.parametrize("case", ["lost", "lost_without_ps", "lost_without_proc", "lost_bash"])
def test_lost_connection_kills_the_tree_with_signals_computed_when_sent(
    supervised: Mapping[str, Supervised], case: str
) -> None:
    if case not in supervised:
        pytest.skip("bash is not installed")
    ran = supervised[case]
    assert not ran.survivors
    assert ran.seconds < 8  # a second of polling, the 2 s grace, slack for a busy machine
    (agent,), (setsid,), (envless,), (late,) = (ran.pids[what] for what in LONG_LIVED)
    assert len(ran.pids["short"]) == 6
    term, kill = [k for k in ran.kills if k[0] == "W"]
    assert (term[1], kill[1]) == ("-TERM", "-KILL")
    # The agent last: its death ends the watchdog, so everything else has its signal by then.
    assert term[2][-1] == kill[2][-1] == agent
    assert len(set(term[2])) == len(term[2]) and len(set(kill[2])) == len(kill[2])
    assert {agent, setsid, envless} <= set(term[2])
    assert late not in term[2]  # it did not exist yet
    assert {agent, late} <= set(kill[2])  # the agent survived SIGTERM, and started `late` then
    assert setsid not in kill[2] and envless not in kill[2]  # gone after SIGTERM: not signalled again
    for who, _, pids in ran.kills:
        assert not set(pids) & set(ran.pids["short"]), "signalled children that had exited long before"
        if who != "W":
            assert agent not in pids, "signalled the agent's PID after wait reaped it"


def test_lost_connection_under_bash_with_a_subshell_around_the_agent(supervised: Mapping[str, Supervised]) -> None:
    # bash keeps a subshell around the fragment; it dies at SIGTERM, the shell reaps it and stops
    # the watchdog. The shell's own cleanup then finds the agent by its token, and the child it
    # started without the token (after SIGTERM) as its descendant.
    if "lost_bash_fragment" not in supervised:
        pytest.skip("bash is not installed")
    ran = supervised["lost_bash_fragment"]
    assert not ran.survivors
    assert ran.seconds < 10
    (agent,), (late,) = ran.pids["agent"], ran.pids["late"]
    (_, _, first), *rest = ran.kills
    wrapper = first[-1]
    assert wrapper != agent and agent in first
    assert rest and all(who == "143" for who, _, _ in rest)
    assert rest[-1][1] == "-KILL" and {agent, late} <= set(rest[-1][2])
    for _, _, pids in rest:
        assert wrapper not in pids  # reaped by then
    for _, _, pids in ran.kills:
        assert not set(pids) & set(ran.pids["short"])


def test_lost_connection_is_noticed_without_ps_through_proc(supervised: Mapping[str, Supervised]) -> None:
    ran = supervised["lost_without_ps"]
    assert [k[1] for k in ran.kills if k[0] == "W"] == ["-TERM", "-KILL"]


def test_lost_connection_with_an_agent_whose_name_looks_like_stat_fields(supervised: Mapping[str, Supervised]) -> None:
    ran = supervised["lost_odd_name"]
    assert not ran.survivors
    ((who, sig, pids),) = ran.kills  # one SIGTERM from the watchdog ends it
    assert (who, sig, len(pids)) == ("W", "-TERM", 1)


def test_agent_exit_kills_what_it_left_behind_but_never_the_reaped_agent(supervised: Mapping[str, Supervised]) -> None:
    ran = supervised["exits"]
    assert ran.code == 3
    assert not ran.survivors
    (agent,), (setsid,) = ran.pids["agent"], ran.pids["setsid"]
    assert ran.kills == [("3", "-TERM", [setsid])]  # by its token; not the agent, not the short-lived ones
    assert agent not in ran.kills[0][2]


# -- SshTarget.prepare with a fake local ssh ----------------------------------------------------

SECRETS = {
    "API_KEY": "sk-live-0123456789abcdef",
    "PLAIN_SETTING": "plain-value-98765",
    "WEIRD": "multi 'q'\nline $HOME \\",
}


def fake_ssh(directory: Path, body: str = "") -> Path:
    """An executable named ``ssh`` that logs its argv and prints ``body`` (for ``ssh -G``)."""
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "ssh-argv.log"
    path = directory / "ssh"
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" >> {shlex.quote(str(log))}\nprintf '%s' {shlex.quote(body)}\n")
    path.chmod(0o755)
    return path


def environ_with(bin_dir: Path, **extra: str) -> dict[str, str]:
    env = {"PATH": str(bin_dir), "HOME": "/nonexistent", **extra}
    if MARKER_NAME in os.environ:  # so the orphan check covers the fake ssh too
        env[MARKER_NAME] = os.environ[MARKER_NAME]
    return env


def prepare(target: SshTarget, command: str | Sequence[str], workspace: str) -> LaunchSpec:
    spec = anyio.run(target.prepare, command, workspace)
    assert isinstance(spec, LaunchSpec)
    return spec


def test_prepare_carries_secrets_on_stdin_only(tmp_path: Path) -> None:
    ssh = fake_ssh(tmp_path / "bin")
    environ = environ_with(tmp_path / "bin", **SECRETS, UNRELATED_TOKEN="tok-unrelated-1234")
    target = SshTarget("user@build:2222", SshSettings(pass_env=tuple(SECRETS)), environ=environ)
    spec = prepare(target, ["agent", "--acp"], "/srv/ws")

    config = fallback_path(tmp_path, None)
    assert spec.argv[0] == str(ssh)
    assert spec.argv[1:-3] == [
        "-F", str(config),  # includes the user's ssh_config, then falls back to accept-new
        *BASE_OPTIONS,
        "-o", "ConnectTimeout=10",
        "-o", "ServerAliveInterval=15",
        "-o", "ServerAliveCountMax=3",
        "-o", "LogLevel=ERROR",
        "-p", "2222",
    ]  # fmt: skip
    assert spec.argv[-3:-1] == ["--", "user@build"]
    exec_word, sh_word, c_word, script = shlex.split(spec.argv[-1])
    assert (exec_word, sh_word, c_word) == ("exec", "sh", "-c")
    assert script.startswith("cd -- /srv/ws 2>/dev/null || ")
    assert f"dd bs=1 count={len(spec.stdin_prefix)} " in script
    assert line_after_session_mark(script) == ["exec agent --acp"]
    assert (spec.target, spec.remote, spec.cwd) == ("user@build:2222", True, None)

    assert spec.stdin_prefix == env_preamble(SECRETS)
    for value in SECRETS.values():
        assert value in spec.secrets
        for word in spec.argv:
            assert value not in word
            assert shlex.quote(value) not in word
        assert value not in spec.target
        assert value not in repr(spec.argv)
    assert "tok-unrelated-1234" in spec.secrets  # secret-looking names are masked even if not carried
    assert list(spec.secrets) == sorted(spec.secrets, key=len, reverse=True)
    assert spec.env == environ  # the local ssh's own environment, untouched

    logged = (tmp_path / "bin" / "ssh-argv.log").read_text()
    assert logged.split("\n")[:-1] == ["-F", str(config), "-G", "-p", "2222", "--", "user@build"]
    for value in SECRETS.values():
        assert value not in logged


def test_prepare_preamble_evaluates_to_the_carried_values(tmp_path: Path) -> None:
    fake_ssh(tmp_path / "bin")
    target = SshTarget("build", SshSettings(pass_env=tuple(SECRETS)), environ=environ_with(tmp_path / "bin", **SECRETS))
    spec = prepare(target, "agent --acp", "/srv/ws")
    reader = f"{sys.executable} -c 'import os,json; print(json.dumps(dict(os.environ)))'"
    done = subprocess.run(
        ["sh", "-c", spec.stdin_prefix.decode() + f"exec {reader}"], capture_output=True, timeout=RUN_TIMEOUT_S
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert {name: seen.get(name) for name in SECRETS} == SECRETS


def test_prepare_without_pass_env_sends_no_preamble(tmp_path: Path) -> None:
    fake_ssh(tmp_path / "bin")
    spec = prepare(SshTarget("build", environ=environ_with(tmp_path / "bin")), "agent --acp", "/srv/ws")
    assert spec.stdin_prefix == b""
    assert "dd bs=1" not in spec.argv[-1]
    assert shlex.split(spec.argv[-1])[3].split("\n")[0].startswith("cd -- /srv/ws ")
    assert "agent --acp" in line_after_session_mark(shlex.split(spec.argv[-1])[3])


def fallback_path(tmp_path: Path, config_file: str | None) -> Path:
    """Where prepare writes the fallback config, in the test's cache directory."""
    text = fallback_config_text(config_file, home=pwd.getpwuid(os.getuid()).pw_dir)
    path = tmp_path / "cache" / "ssh" / f"config-{hashlib.sha256(text.encode()).hexdigest()[:32]}"
    assert path.read_text() == text
    return path


INSECURE_WARNING = "the ssh_config turns host key checking off for this host"


@pytest.mark.parametrize(
    ("printed", "warned"),
    [
        ("", False),
        ("user root\nstricthostkeychecking accept-new\n", False),
        ("stricthostkeychecking ask\n", False),  # the user's own ask: strict under BatchMode
        ("stricthostkeychecking true\n", False),
        ("stricthostkeychecking false\n", True),  # how ssh -G spells no (and off)
        ("stricthostkeychecking no\n", True),
        ("stricthostkeychecking off\n", True),
    ],
)
def test_prepare_never_passes_a_policy_of_ours_and_warns_when_the_config_turns_checking_off(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, printed: str, warned: bool
) -> None:
    fake_ssh(tmp_path / "bin", printed)
    with caplog.at_level(logging.WARNING, logger="remote_acp.targets.ssh"):
        spec = prepare(SshTarget("build", environ=environ_with(tmp_path / "bin")), ["agent"], "/srv/ws")
    assert spec.argv[1:3] == ["-F", str(fallback_path(tmp_path, None))]
    assert not [word for word in spec.argv if "StrictHostKeyChecking" in word]
    assert any(INSECURE_WARNING in message for message in caplog.messages) is warned


def test_prepare_with_a_config_file_includes_it_by_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_ssh(tmp_path / "bin")
    (tmp_path / "conf dir").mkdir()
    (tmp_path / "conf dir" / "my config").write_text("Host build\n  User u\n")
    monkeypatch.chdir(tmp_path / "conf dir")
    settings = SshSettings(config_file="my config")
    spec = prepare(SshTarget("build", settings, environ=environ_with(tmp_path / "bin")), ["agent"], "/srv/ws")
    config = fallback_path(tmp_path, str(tmp_path / "conf dir" / "my config"))
    assert spec.argv[1:3] == ["-F", str(config)]
    assert f'Include "{tmp_path}/conf dir/my config"\n' in config.read_text()


@pytest.mark.parametrize("config_file", ["none", "NONE", "/dev/null"])
def test_prepare_with_no_config_file_includes_nothing(tmp_path: Path, config_file: str) -> None:
    fake_ssh(tmp_path / "bin")
    settings = SshSettings(config_file=config_file)
    spec = prepare(SshTarget("build", settings, environ=environ_with(tmp_path / "bin")), ["agent"], "/srv/ws")
    config = fallback_path(tmp_path, "none")
    assert spec.argv[1:3] == ["-F", str(config)]
    assert "Include" not in config.read_text()


def test_prepare_explicit_policy_and_config_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    fake_ssh(tmp_path / "bin", "stricthostkeychecking false\n")
    (tmp_path / "test ssh_config").write_text("")
    settings = SshSettings(host_key_policy="yes", config_file=str(tmp_path / "test ssh_config"))
    spec = prepare(SshTarget("build", settings, environ=environ_with(tmp_path / "bin")), ["agent"], "/srv/ws")
    assert spec.argv[1:3] == ["-F", str(tmp_path / "test ssh_config")]  # the user's file itself
    assert [w for w in spec.argv if w.startswith("StrictHostKeyChecking=")] == ["StrictHostKeyChecking=yes"]
    assert not (tmp_path / "bin" / "ssh-argv.log").exists()  # an explicit policy needs no `ssh -G`
    assert not (tmp_path / "cache").exists()  # nor a fallback config
    assert not caplog.messages


def test_prepare_explicit_policy_without_config_file_passes_no_file(tmp_path: Path) -> None:
    fake_ssh(tmp_path / "bin")
    settings = SshSettings(host_key_policy="no", force_insecure_host_keys=True)
    spec = prepare(SshTarget("build", settings, environ=environ_with(tmp_path / "bin")), ["agent"], "/srv/ws")
    assert "-F" not in spec.argv
    assert [w for w in spec.argv if w.startswith("StrictHostKeyChecking=")] == ["StrictHostKeyChecking=no"]


@pytest.mark.parametrize("policy", [None, "yes"])
def test_prepare_refuses_a_config_file_that_does_not_exist(tmp_path: Path, policy: HostKeyPolicy | None) -> None:
    fake_ssh(tmp_path / "bin")
    settings = SshSettings(host_key_policy=policy, config_file=str(tmp_path / "missing"))
    with raises_kind(ErrorKind.AGENT_NOT_FOUND) as info:
        prepare(SshTarget("build", settings, environ=environ_with(tmp_path / "bin")), ["agent"], "/srv/ws")
    assert info.value.message == f"the ssh config file {tmp_path / 'missing'} does not exist"


def test_prepare_reports_a_cache_directory_it_cannot_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_ssh(tmp_path / "bin")
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("REMOTE_ACP_CACHE_DIR", str(tmp_path / "a-file"))
    with raises_kind(ErrorKind.AGENT_NOT_FOUND) as info:
        prepare(SshTarget("build", environ=environ_with(tmp_path / "bin")), ["agent"], "/srv/ws")
    assert info.value.message.startswith(f"cannot write an ssh config under {tmp_path / 'a-file' / 'ssh'}: ")
    assert info.value.message.endswith("(set REMOTE_ACP_CACHE_DIR to a writable directory)")


def test_ssh_target_repr_hides_the_environment() -> None:
    target = SshTarget("build", environ={"API_KEY": "sk-live-0123456789abcdef"})
    assert "sk-live" not in repr(target)
    assert "environ" not in repr(target)
    assert repr(target).startswith("SshTarget(host='build', settings=SshSettings(")


def test_prepare_refuses_a_pass_env_name_that_is_not_set(tmp_path: Path) -> None:
    fake_ssh(tmp_path / "bin")
    environ = environ_with(tmp_path / "bin", API_KEY="sk-live-0123456789abcdef")
    target = SshTarget("build", SshSettings(pass_env=("API_KEY", "MISSING_ONE")), environ=environ)
    with raises_kind(ErrorKind.AGENT_NOT_FOUND) as info:
        prepare(target, ["agent"], "/srv/ws")
    assert info.value.message == "ssh_pass_env names MISSING_ONE, which is not set in the environment"
    assert "sk-live" not in str(info.value)


def test_prepare_refuses_bad_inputs(tmp_path: Path) -> None:
    fake_ssh(tmp_path / "bin")
    target = SshTarget("build", environ=environ_with(tmp_path / "bin"))
    with raises_kind(ErrorKind.INVALID_WORKSPACE_CWD):
        prepare(target, ["agent"], "relative/ws")
    with raises_kind(ErrorKind.INVALID_WORKSPACE_CWD):
        prepare(target, ["agent"], "  ")
    with raises_kind(ErrorKind.AGENT_NOT_FOUND):
        prepare(target, "   ", "/srv/ws")
    with raises_kind(ErrorKind.AGENT_NOT_FOUND):
        prepare(target, [], "/srv/ws")
    with raises_kind(ErrorKind.AGENT_NOT_FOUND):
        prepare(SshTarget("-oProxyCommand=x", environ=environ_with(tmp_path / "bin")), ["agent"], "/srv/ws")
    (tmp_path / "empty").mkdir()
    with raises_kind(ErrorKind.AGENT_NOT_FOUND) as info:
        prepare(SshTarget("build", environ=environ_with(tmp_path / "empty")), ["agent"], "/srv/ws")
    assert info.value.message == "ssh binary not found on this host's PATH"


# -- SshTarget.exit_error -----------------------------------------------------------------------


def test_exit_255_before_any_output_is_an_ssh_connection_failure() -> None:
    stderr = "ssh: connect to host build port 22: Connection refused"
    error = SshTarget("build").exit_error(ExitStatus(255), agent_wrote=False, stderr=stderr)
    assert error is not None
    assert error.kind is ErrorKind.PORT_EXIT
    assert error.message == "ssh connection failed"
    assert error.detail == stderr
    assert str(error) == f"ssh connection failed: {stderr}"


def test_exit_255_after_output_is_not_a_connection_failure() -> None:
    assert SshTarget("build").exit_error(ExitStatus(255), agent_wrote=True, stderr="whatever") is None


def test_exit_97_with_the_mark_is_an_invalid_workspace() -> None:
    stderr = f"{WORKSPACE_MARK} /srv/missing ws\n"
    for agent_wrote in (False, True):
        error = SshTarget("user@build:2222").exit_error(ExitStatus(97), agent_wrote=agent_wrote, stderr=stderr)
        assert error is not None
        assert error.kind is ErrorKind.INVALID_WORKSPACE_CWD
        assert error.message == "the workspace does not exist on user@build:2222 or cannot be entered"
        assert error.detail == stderr


def test_exit_97_without_the_mark_is_left_to_the_generic_reading() -> None:
    assert SshTarget("build").exit_error(ExitStatus(97), agent_wrote=False, stderr="agent said 97") is None


@pytest.mark.parametrize("code", [137, 143, 130])
def test_signal_mark_is_reported_as_a_killed_agent(code: int) -> None:
    stderr = f"{SIGNAL_MARK} {code - 128}\n"
    error = SshTarget("[::1]:2201").exit_error(ExitStatus(code), agent_wrote=True, stderr=stderr)
    assert error is not None
    assert error.kind is ErrorKind.PORT_EXIT
    assert error.message == "the agent runtime on [::1]:2201 was killed by a signal"
    assert "killed by a signal" in str(error)
    assert error.detail == stderr


@pytest.mark.parametrize(
    ("status", "agent_wrote", "stderr"),
    [
        (ExitStatus(0), False, ""),
        (ExitStatus(1), True, "error"),
        (ExitStatus(7), False, ""),
        (ExitStatus(98), False, ENV_MESSAGE),
        (ExitStatus(127), False, "sh: 1: agent: not found"),
        (ExitStatus(137), False, "no mark here"),
        (ExitStatus(254), False, ""),
        (ExitStatus(None, signal.SIGKILL), False, ""),
        (ExitStatus(None, signal.SIGTERM), True, f"{SIGNAL_MARK} 15"),
    ],
)
def test_other_exits_are_left_to_the_generic_reading(status: ExitStatus, agent_wrote: bool, stderr: str) -> None:
    assert SshTarget("build").exit_error(status, agent_wrote=agent_wrote, stderr=stderr) is None
