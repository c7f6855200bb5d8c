"""The environment carried over stdin: the preamble as data and as sh reads it, and how prepare
builds it (never on argv, always masked)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from typing import TYPE_CHECKING

from remote_acp.errors import ErrorKind
from remote_acp.targets.ssh.argv import ready_bound_ms
from remote_acp.targets.ssh.loader import BOOTSTRAP, data_line, stdin_prefix
from remote_acp.targets.ssh.ready_marker import ReadyMarker
from remote_acp.targets.ssh.script import remote_script
from remote_acp.targets.ssh.settings import SshSettings
from remote_acp.targets.ssh.target import SshTarget
from tests.support.ssh_build import (
    RUN_TIMEOUT_S,
    environ_with,
    fake_ssh,
    fallback_path,
    host_runs,
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

# -- the carried environment, as the host's sh reads it -----------------------------------------

READ_ENV = "import os,json; print(json.dumps(dict(os.environ)))"


def run_prefix(prefix: bytes, shell: list[str]) -> subprocess.CompletedProcess[bytes]:
    """The prefix as the host reads it: ``sh -c BOOTSTRAP`` with the prefix on stdin."""
    return subprocess.run(
        [*shell, "-c", BOOTSTRAP], input=prefix, capture_output=True, timeout=RUN_TIMEOUT_S, check=False
    )


def test_carried_values_are_in_the_data_line_only_quoted_then_encoded() -> None:
    line = data_line("/w", ["agent"], ENV_VALUES)
    escaped = line[len("_ra_data='") : -1]
    decoded = re.sub(r"\\0([0-7]{3})", lambda m: chr(int(m.group(1), 8)), escaped).encode("latin-1").decode()
    exports = "export " + " ".join(f"{name}={shlex.quote(value)}" for name, value in ENV_VALUES.items())
    assert f"\n_ra_env={shlex.quote(exports)}\n_ra_complete=1" in decoded
    script = remote_script("/w", ["agent"], ENV_VALUES, token="t")
    code = script.replace(line, "")
    assert all(value not in code for value in ENV_VALUES.values() if len(value) > 2)


def test_values_that_are_not_utf8_arrive_as_their_bytes() -> None:
    raw = b"tok\xffen \xc3( 'q' \x80"
    value = os.fsdecode(raw)  # what os.environ holds for undecodable bytes: surrogate escapes
    reader = "import os,sys; sys.stdout.buffer.write(os.environb[b'RAW'])"
    prefix = stdin_prefix(remote_script("/", [sys.executable, "-c", reader], {"RAW": value, "OK": "ü"}))
    for shell in shells():
        done = run_prefix(prefix, shell)
        assert (done.returncode, done.stdout) == (0, raw), (shell, done.stderr)


def test_carried_values_are_exported_exactly() -> None:
    prefix = stdin_prefix(remote_script("/", [sys.executable, "-c", READ_ENV], ENV_VALUES))
    for shell in shells():
        done = run_prefix(prefix, shell)
        assert done.returncode == 0, (shell, done.stderr)
        seen = json.loads(done.stdout)
        assert {name: seen.get(name) for name in ENV_VALUES} == ENV_VALUES, shell
        assert not [name for name in seen if name.lower().startswith("_ra_") and name != "_RA_SESSION"]


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
    assert spec.argv[1:3] == ["-F", str(config)]  # the options themselves: tests/test_ssh_argv.py
    assert spec.argv[-3:-1] == ["--", "user@build"]
    assert shlex.split(spec.argv[-1]) == ["exec", "/bin/sh", "-c", BOOTSTRAP]  # fixed, no data in it
    assert (spec.target, spec.remote, spec.cwd) == ("user@build:2222", True, None)
    login = spec.prelude
    assert isinstance(login, ReadyMarker)
    marker = login.marker.decode()
    assert re.fullmatch(r"remote-acp-ready-[0-9a-f]{16}", marker)
    assert (login.reply, login.bound_ms) == (b"go\n", ready_bound_ms(target.settings))
    assert ready_bound_ms(target.settings) == 20_000  # connect 10 s, then as long again

    prefix = login.opening.decode()
    assert f"printf '%s\\n' {marker}\n" in prefix
    assert line_after_session_mark(prefix.split("\n", 1)[1])[-1] == '  eval "$_ra_cmd"'
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
    # -v: ssh names the files it read, which decide how long its answer may be kept.
    runs = host_runs(tmp_path / "bin" / "ssh-argv.log")
    assert runs == ["-v", "-F", str(config), "-G", "-p", "2222", "--", "user@build"]
    for value in SECRETS.values():
        assert value not in logged


def test_prepare_prefix_runs_with_the_carried_values_after_the_go_ahead(tmp_path: Path) -> None:
    fake_ssh(tmp_path / "bin")
    target = SshTarget("build", SshSettings(pass_env=tuple(SECRETS)), environ=environ_with(tmp_path / "bin", **SECRETS))
    login = prepare(target, [sys.executable, "-c", READ_ENV], "/").prelude
    assert isinstance(login, ReadyMarker)
    done = subprocess.run(
        ["sh", "-c", BOOTSTRAP], input=login.opening + login.reply, capture_output=True, timeout=RUN_TIMEOUT_S
    )
    assert done.returncode == 0, done.stderr
    marker, rest = done.stdout.split(b"\n", 1)
    assert marker == login.marker
    seen = json.loads(rest)
    assert {name: seen.get(name) for name in SECRETS} == SECRETS


def test_each_session_has_its_own_ready_marker(tmp_path: Path) -> None:
    fake_ssh(tmp_path / "bin")
    target = SshTarget("build", environ=environ_with(tmp_path / "bin"))
    markers = {getattr(prepare(target, "agent --acp", "/srv/ws").prelude, "marker", None) for _ in range(5)}
    assert len(markers) == 5


def test_prepare_refuses_a_pass_env_name_that_is_not_set(tmp_path: Path) -> None:
    fake_ssh(tmp_path / "bin")
    environ = environ_with(tmp_path / "bin", API_KEY="sk-live-0123456789abcdef")
    target = SshTarget("build", SshSettings(pass_env=("API_KEY", "MISSING_ONE")), environ=environ)
    with raises_kind(ErrorKind.AGENT_NOT_FOUND) as info:
        prepare(target, ["agent"], "/srv/ws")
    assert info.value.message == "ssh_pass_env names MISSING_ONE, which is not set in the environment"
    assert "sk-live" not in str(info.value)
