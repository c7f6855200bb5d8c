"""The pure parts of the SSH launch target, tested as data: no ssh connection, no sshd.

The remote script is an ordinary POSIX sh script reading stdin, so its promises (the workspace
and the command words arrive intact, a failing ``cd`` never runs the command, the environment
comes over stdin, exit statuses and signals are reported) are proven by running it locally with
``sh -c SCRIPT``. Those runs are slow-ish (the script's watchdog polls once a second), so they are
started together once per module and each test reads its own result.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import pytest

from remote_acp.errors import ErrorKind, RemoteAcpError
from remote_acp.launch import LaunchSpec
from remote_acp.process import ExitStatus
from remote_acp.ssh import (
    Destination,
    SshSettings,
    SshTarget,
    env_preamble,
    parse_destination,
    remote_script,
    ssh_argv,
)
from tests.support.orphans import MARKER_NAME, kill_marked

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
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


def test_ssh_argv_default_settings_accept_new() -> None:
    argv = ssh_argv("/usr/bin/ssh", Destination("build"), SshSettings(), "echo hi", policy="accept-new")
    assert argv == [
        "/usr/bin/ssh",
        "-T",
        "-e", "none",
        "-x",
        "-a",
        "-o", "BatchMode=yes",
        "-o", "ConnectTimeout=10",
        "-o", "ServerAliveInterval=15",
        "-o", "ServerAliveCountMax=3",
        "-o", "LogLevel=ERROR",
        "-o", "StrictHostKeyChecking=accept-new",
        "--", "build", "exec sh -c 'echo hi'",
    ]  # fmt: skip


def test_ssh_argv_without_a_policy_passes_no_host_key_option() -> None:
    argv = ssh_argv("ssh", Destination("build"), SshSettings(), "echo hi", policy=None)
    assert argv == [
        "ssh",
        *BASE_OPTIONS,
        "-o", "ConnectTimeout=10",
        "-o", "ServerAliveInterval=15",
        "-o", "ServerAliveCountMax=3",
        "-o", "LogLevel=ERROR",
        "--", "build", "exec sh -c 'echo hi'",
    ]  # fmt: skip
    assert not any("StrictHostKeyChecking" in word for word in argv)


def test_ssh_argv_with_config_file_port_timeouts_and_policy_yes() -> None:
    settings = SshSettings(
        host_key_policy="yes",
        config_file="/etc/remote acp/ssh_config",
        connect_timeout_s=3,
        server_alive_interval_s=5,
        server_alive_count_max=2,
    )
    argv = ssh_argv("/opt/ssh", Destination("user@::1", 2201), settings, "true", policy="yes")
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


def test_ssh_argv_forced_no_policy_and_port_without_config() -> None:
    settings = SshSettings(host_key_policy="no", force_insecure_host_keys=True, server_alive_count_max=1)
    argv = ssh_argv("ssh", Destination("build", 22), settings, "x", policy="no")
    assert argv[argv.index("StrictHostKeyChecking=no") - 1] == "-o"
    assert "-F" not in argv
    assert argv[-5:] == ["-p", "22", "--", "build", "exec sh -c x"]
    assert "ServerAliveCountMax=1" in argv


@pytest.mark.parametrize(
    "remote",
    ["echo hi", "it's a 'test'", 'a "b" $c `d` $(e); f && g', "line1\nline2\n", "", "-n", "\\ *", "ünï"],
)
def test_ssh_argv_remote_command_is_one_word_exec_sh_c(remote: str) -> None:
    argv = ssh_argv("ssh", Destination("build", 2222), SshSettings(), remote, policy="accept-new")
    # `--` comes immediately before the destination, which is followed by the one remote word.
    assert argv[-3:-1] == ["--", "build"]
    assert argv.count("--") == 1
    assert argv[-1].startswith("exec sh -c ")
    assert shlex.split(argv[-1]) == ["exec", "sh", "-c", remote]


def test_ssh_argv_remote_word_runs_the_script_through_a_login_shell() -> None:
    # The far side's login shell runs `$SHELL -c WORD`; the word must hand the script over intact.
    script = "printf '%s|' \"$0\" 'it'\"'\"'s' \"$HOME\" '$HOME'"
    argv = ssh_argv("ssh", Destination("build"), SshSettings(), script, policy=None)
    env = {**os.environ, "HOME": "/home/h"}
    done = subprocess.run(["sh", "-c", argv[-1]], capture_output=True, env=env, timeout=RUN_TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"sh|it's|/home/h|$HOME|"


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


BOUNDED_FIELDS = ["connect_timeout_s", "server_alive_interval_s", "server_alive_count_max", "kill_grace_s"]


@pytest.mark.parametrize("field", BOUNDED_FIELDS)
@pytest.mark.parametrize("value", [0, -1, -3600])
def test_settings_refuse_bounds_below_one(field: str, value: int) -> None:
    with pytest.raises(ValueError) as info:
        SshSettings(**{field: value})  # type: ignore[arg-type]
    assert str(info.value) == f"{field} must be at least 1"
    assert getattr(SshSettings(**{field: 1}), field) == 1  # type: ignore[arg-type]


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
    ],
)
def test_settings_refuse_invalid_pass_env_names_by_position(names: tuple[str, ...], index: int) -> None:
    with pytest.raises(ValueError) as info:
        SshSettings(pass_env=names)
    message = str(info.value)
    assert message == f"ssh_pass_env entry {index} is not a valid environment variable name"
    bad = names[index]
    assert not bad or bad.strip() not in message  # the text could be a secret: never echoed


def test_settings_accept_valid_pass_env_names() -> None:
    names = ("API_KEY", "_", "a1", "_private", "RA_OK", "_RA", "lower_case")
    assert SshSettings(pass_env=names).pass_env == names


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
    assert line_after_session_mark(script) == ["agent --acp"]
    assert "{ export _RA_SESSION=abc123." in lines
    assert 'grep -l -s -a "_RA_SESSION=abc123\\."' in script
    assert 'while [ "$_ra_n" -lt 5 ]; do' in script
    assert script.rstrip().endswith('exit "$_ra_rc"')
    assert "__" not in script.replace("__pycache__", "")  # every placeholder filled


def test_remote_script_list_command_is_quoted_word_by_word() -> None:
    command = ["/opt/my agent/bin/agent", *HOSTILE_WORDS]
    script = remote_script("/w", command, token="t")
    fragment = "\n".join(line_after_session_mark(script))
    assert fragment == shlex.join(command)
    assert shlex.split(fragment) == command


def test_remote_script_string_command_goes_verbatim() -> None:
    for command in ["echo a && echo b", "FOO=1 exec agent --acp 2>>log", "if true; then\n  agent\nfi", "a | b; c"]:
        script = remote_script("/w", f"  {command}\n ", token="t")
        assert line_after_session_mark(script) == command.split("\n")


def test_remote_script_list_command_that_looks_like_a_fragment_stays_one_word() -> None:
    script = remote_script("/w", ["echo hi && touch pwned"], token="t")
    assert line_after_session_mark(script) == ["'echo hi && touch pwned'"]


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
        policy="accept-new",
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

    assert spec.argv[0] == str(ssh)
    assert spec.argv[1:-3] == [
        *BASE_OPTIONS,
        "-o", "ConnectTimeout=10",
        "-o", "ServerAliveInterval=15",
        "-o", "ServerAliveCountMax=3",
        "-o", "LogLevel=ERROR",
        "-o", "StrictHostKeyChecking=accept-new",  # ssh -G printed no policy of the user's
        "-p", "2222",
    ]  # fmt: skip
    assert spec.argv[-3:-1] == ["--", "user@build"]
    exec_word, sh_word, c_word, script = shlex.split(spec.argv[-1])
    assert (exec_word, sh_word, c_word) == ("exec", "sh", "-c")
    assert script.startswith("cd -- /srv/ws 2>/dev/null || ")
    assert f"dd bs=1 count={len(spec.stdin_prefix)} " in script
    assert line_after_session_mark(script) == ["agent --acp"]
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
    assert logged.split("\n")[:-1] == ["-G", "-p", "2222", "--", "user@build"]
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


@pytest.mark.parametrize(
    ("printed", "expected"),
    [
        ("", "StrictHostKeyChecking=accept-new"),
        ("user root\nstricthostkeychecking ask\n", "StrictHostKeyChecking=accept-new"),
        ("stricthostkeychecking yes\n", None),
        ("stricthostkeychecking false\n", None),
    ],
)
def test_prepare_leaves_a_user_configured_policy_in_charge(tmp_path: Path, printed: str, expected: str | None) -> None:
    fake_ssh(tmp_path / "bin", printed)
    spec = prepare(SshTarget("build", environ=environ_with(tmp_path / "bin")), ["agent"], "/srv/ws")
    policies = [word for word in spec.argv if word.startswith("StrictHostKeyChecking=")]
    assert policies == ([] if expected is None else [expected])


def test_prepare_explicit_policy_and_config_file(tmp_path: Path) -> None:
    fake_ssh(tmp_path / "bin", "stricthostkeychecking no\n")
    settings = SshSettings(host_key_policy="yes", config_file="/etc/test ssh_config")
    spec = prepare(SshTarget("build", settings, environ=environ_with(tmp_path / "bin")), ["agent"], "/srv/ws")
    assert spec.argv[1:3] == ["-F", "/etc/test ssh_config"]
    assert [w for w in spec.argv if w.startswith("StrictHostKeyChecking=")] == ["StrictHostKeyChecking=yes"]
    assert not (tmp_path / "bin" / "ssh-argv.log").exists()  # an explicit policy needs no `ssh -G`


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
