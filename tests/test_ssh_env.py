"""The environment carried over stdin: the preamble as data and as sh reads it, and how prepare
builds it (never on argv, always masked)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from typing import TYPE_CHECKING

from remote_acp.errors import ErrorKind
from remote_acp.targets.ssh import (
    SshSettings,
    SshTarget,
    env_preamble,
)
from tests.support.ssh_build import (
    BASE_OPTIONS,
    CONTROL_OPTIONS,
    RUN_TIMEOUT_S,
    environ_with,
    fake_ssh,
    fallback_path,
    line_after_session_mark,
    prepare,
    raises_kind,
    shells,
)

if TYPE_CHECKING:
    from pathlib import Path

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


# -- SshTarget.prepare with a fake local ssh ----------------------------------------------------


SECRETS = {
    "API_KEY": "sk-live-0123456789abcdef",
    "PLAIN_SETTING": "plain-value-98765",
    "WEIRD": "multi 'q'\nline $HOME \\",
}


def test_prepare_carries_secrets_on_stdin_only(tmp_path: Path) -> None:
    ssh = fake_ssh(tmp_path / "bin")
    environ = environ_with(tmp_path / "bin", **SECRETS, UNRELATED_TOKEN="tok-unrelated-1234")
    target = SshTarget("user@build:2222", SshSettings(pass_env=tuple(SECRETS)), environ=environ)
    spec = prepare(target, ["agent", "--acp"], "/srv/ws")

    config = fallback_path(None)
    assert spec.argv[0] == str(ssh)
    assert spec.argv[1:-3] == [
        "-F", str(config),  # includes the user's ssh_config, then falls back to accept-new
        *BASE_OPTIONS,
        "-o", "ConnectTimeout=10",
        "-o", "ServerAliveInterval=15",
        "-o", "ServerAliveCountMax=3",
        "-o", "LogLevel=ERROR",
        *CONTROL_OPTIONS,
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


def test_prepare_refuses_a_pass_env_name_that_is_not_set(tmp_path: Path) -> None:
    fake_ssh(tmp_path / "bin")
    environ = environ_with(tmp_path / "bin", API_KEY="sk-live-0123456789abcdef")
    target = SshTarget("build", SshSettings(pass_env=("API_KEY", "MISSING_ONE")), environ=environ)
    with raises_kind(ErrorKind.AGENT_NOT_FOUND) as info:
        prepare(target, ["agent"], "/srv/ws")
    assert info.value.message == "ssh_pass_env names MISSING_ONE, which is not set in the environment"
    assert "sk-live" not in str(info.value)
