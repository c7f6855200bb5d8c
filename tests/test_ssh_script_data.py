"""The remote script and the login line as data: what the text holds and never holds (no datum
as text, plain characters and octal escapes only), what it refuses, and that every POSIX sh
here reads it. Running it is in test_ssh_script."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest

from remote_acp.errors import ErrorKind
from remote_acp.targets.ssh.loader import BOOTSTRAP, END_MARK, data_line, stdin_prefix
from remote_acp.targets.ssh.relay.login import attach_login_script
from remote_acp.targets.ssh.script import remote_script
from tests.support.script_inputs import ENV_VALUES, HOSTILE_DIR, HOSTILE_WORDS, PRINT_CWD_AND_ARGS, login_line
from tests.support.ssh_build import RUN_TIMEOUT_S, raises_kind, shells


def test_the_login_line_is_fixed_and_means_the_same_in_every_shell() -> None:
    line = login_line()
    # Nothing any shell reads differently: no backslash (fish), no newline or ! (csh), and the
    # one $ inside single quotes, where no shell expands it.
    for c in "\\\n!`":
        assert c not in line
    assert line.count("$") == 1
    words = shlex.split(line)
    assert words[-1] == BOOTSTRAP
    assert line.index("$") > line.index("'")


@pytest.mark.parametrize("workspace", ["/srv/ws", "/" + HOSTILE_DIR, "/a\\'; touch PWNED; echo '"])
def test_no_datum_is_in_the_script_as_text(workspace: str) -> None:
    command = ["/opt/agent", *HOSTILE_WORDS]
    env = {"SECRET": "sk-live-0123456789abcdef", **ENV_VALUES}
    script = remote_script(workspace, command, env, token="t0", ready_marker="remote-acp-ready-x")
    lines = script.split("\n")
    code = "\n".join(lines[:1] + lines[2:])  # everything but the data line
    for datum in [workspace, *[w for w in HOSTILE_WORDS if len(w) > 3], "touch", "sk-live-0123456789abcdef"]:
        assert datum not in code
        if not re.fullmatch(r"[A-Za-z0-9/._,:+=@%-]*", datum):
            assert datum not in script  # only plain characters stay as they are
    assert script.split("\n")[1] == data_line(workspace, command, env)


def test_the_data_line_is_plain_characters_and_octal_escapes_only() -> None:
    line = data_line("/" + HOSTILE_DIR, ["agent", *HOSTILE_WORDS], ENV_VALUES)
    assert line.startswith("_ra_data='") and line.endswith("'")
    body = line[len("_ra_data='") : -1]
    # Cut anywhere, a run of these is one word: no quote, blank, separator or expansion.
    assert re.fullmatch(r"(?:[A-Za-z0-9/._,:+=@%-]|\\0[0-7]{3})*", body)


def test_the_data_decodes_to_shlex_quoted_assignments() -> None:
    line = data_line("/w s", ["a", "b c"], {"K": "v'1"})
    decoded = re.sub(r"\\0([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line[len("_ra_data='") : -1])
    assert decoded.split("\n") == [
        "_ra_ws='/w s'",
        "set -- a 'b c'",
        "_ra_cmd=",
        "_ra_list=1",
        "_ra_env=" + shlex.quote("export K=" + shlex.quote("v'1")),
        "_ra_complete=1",
    ]
    decoded = re.sub(r"\\0([0-7]{3})", lambda m: chr(int(m.group(1), 8)), data_line("/w", "  a && b\n")[10:-1])
    assert decoded.split("\n") == ["_ra_ws=/w", "_ra_cmd='a && b'", "_ra_list=", "_ra_env=", "_ra_complete=1"]


def test_remote_script_with_a_plain_workspace_is_data_cd_tools_marker_then_supervisor() -> None:
    script = remote_script("/srv/ws dir", ["agent", "--acp"], token="abc123", kill_grace_s=5, ready_marker="rdy-1")
    lines = script.split("\n")
    assert lines[0].startswith("_ra_first=1; case ${l-} in _ra_first=1*) ")
    assert lines[4] == (
        'cd -- "$_ra_ws" 2>/dev/null || { _ra_why=denied; [ -d "$_ra_ws" ] || _ra_why=not_dir; '
        '[ -e "$_ra_ws" ] || _ra_why=missing; '
        "printf '%s %s %s\\n' 'remote-acp: workspace unavailable:' \"$_ra_why\" \"$_ra_ws\" >&2; exit 97; }"
    )
    assert lines.index("printf '%s\\n' rdy-1") < lines.index("_ra_shell=$$")
    assert lines.index("printf '%s\\n' rdy-1") > lines.index("for _ra_t in $_ra_tools; do")
    assert "{ export _RA_SESSION=abc123." in lines
    assert 'grep -l -s -a "_RA_SESSION=abc123\\."' in script
    assert 'while [ "$_ra_n" -lt 5 ]; do' in script
    assert lines[-2] == END_MARK and lines[-1] == ""
    assert "__" not in script.replace("__pycache__", "")  # every placeholder filled


def test_remote_script_without_a_marker_reads_no_go_ahead() -> None:
    script = remote_script("/w", ["agent"], token="t")
    assert "_ra_go" not in script


def test_remote_script_refuses_an_empty_list_command() -> None:
    with raises_kind(ErrorKind.AGENT_NOT_FOUND):
        remote_script("/w", [])
    with raises_kind(ErrorKind.AGENT_NOT_FOUND):
        remote_script("/w", ["", "x"])


def test_remote_script_refuses_an_odd_marker_or_tool_path() -> None:
    for marker in ["", "a b", "a'b", "ü"]:
        with pytest.raises(ValueError, match="ready marker"):
            remote_script("/w", ["a"], ready_marker=marker)
    for path in ["/a'b", "/a\\b", "/a\nb"]:
        with pytest.raises(ValueError, match="tool path"):
            remote_script("/w", ["a"], tool_path=path)


def test_stdin_prefix_is_the_loader_line_then_the_script() -> None:
    script = remote_script("/w", ["agent"], token="t")
    prefix = stdin_prefix(script)
    loader, rest = prefix.split(b"\n", 1)
    assert rest == script.encode()
    assert f"-lt {script.count(chr(10))} ]".encode() in loader
    assert b"\\" in loader and b"'" in loader  # fine: only /bin/sh ever reads it
    with pytest.raises(ValueError, match="end mark"):
        stdin_prefix("echo hi\n")


def test_remote_script_token_is_random_by_default() -> None:
    tokens = {re.findall(r"_RA_SESSION=([0-9a-f]+)\.\n", remote_script("/w", ["a"]))[0] for _ in range(20)}
    assert len(tokens) == 20
    assert all(len(token) == 16 for token in tokens)


@pytest.mark.parametrize("shell", shells(), ids=lambda shell: "-".join(shell))
def test_remote_script_and_loader_are_valid_posix_sh(shell: list[str]) -> None:
    commands: list[str | list[str]] = [
        [sys.executable, "-c", PRINT_CWD_AND_ARGS, *HOSTILE_WORDS],
        ["agent"],
        "echo a && echo b",
        "if true; then\n  exec agent --acp\nfi",
        "exit 7",
    ]
    for workspace in ["/srv/ws", "/" + HOSTILE_DIR]:
        for command in commands:
            for env in ({}, ENV_VALUES):
                script = remote_script(workspace, command, env, kill_grace_s=2, ready_marker="m-1")
                for text in (script, stdin_prefix(script).decode().split("\n")[0], BOOTSTRAP):
                    done = subprocess.run([*shell, "-n", "-c", text], capture_output=True, timeout=RUN_TIMEOUT_S)
                    assert done.returncode == 0, (workspace, command, env, done.stderr)
                    assert done.stdout == b"", done.stdout


@pytest.mark.process
@pytest.mark.parametrize("shell", shells(), ids=lambda shell: "-".join(shell))
def test_the_window_script_and_the_reconnect_login_are_valid_posix_sh_with_every_placeholder_filled(
    shell: list[str],
) -> None:
    texts = [
        remote_script("/srv/ws", ["agent", "--acp"], ENV_VALUES, ready_marker="m-1", reattach_window_s=5, capacity=2),
        remote_script("/" + HOSTILE_DIR, "exec agent", ready_marker="m-1", reattach_window_s=60, preflight="true"),
        attach_login_script(ready_marker="m-1"),
        attach_login_script(ready_marker="m-1", slot_prefix="/srv/slots-"),
    ]
    for text in texts:
        assert text.endswith(END_MARK + "\n")
        assert "__" not in text.replace("__pycache__", "")
        for checked in (text, stdin_prefix(text, whole_input=True).decode().split("\n")[0]):
            done = subprocess.run([*shell, "-n", "-c", checked], capture_output=True, timeout=RUN_TIMEOUT_S)
            assert (done.returncode, done.stdout) == (0, b""), done.stderr
