"""The generated ssh_config carrying our host-key default as a fallback, and how prepare uses it."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import anyio
import pytest

from remote_acp.errors import ErrorKind
from remote_acp.targets.ssh.config import (
    effective_host_key_policy,
    fallback_config_dir,
    write_fallback_config,
)
from remote_acp.targets.ssh.destination import Destination
from remote_acp.targets.ssh.settings import HostKeyPolicy, SshSettings
from remote_acp.targets.ssh.target import SshTarget
from tests.support.ssh_build import (
    environ_with,
    fake_ssh,
    fallback_path,
    host_runs,
    prepare,
    raises_kind,
    session_config_text,
)

if TYPE_CHECKING:
    from pathlib import Path

# -- the fallback ssh_config -------------------------------------------------------------------


def test_fallback_config_includes_what_ssh_reads_by_default_then_accept_new() -> None:
    assert session_config_text(None, home="/home/u") == (
        "# Written by remote-acp: no connection sharing, the ssh_config ssh would read, then our defaults.\n"
        "ControlMaster no\n"
        "ControlPath none\n"
        'Include "/home/u/.ssh/config"\n'
        'Include "/etc/ssh/ssh_config"\n'
        "Host *\n"
        "  StrictHostKeyChecking accept-new\n"
    )


def test_fallback_config_with_an_explicit_file_includes_only_it() -> None:
    # As with `ssh -F FILE`: neither ~/.ssh/config nor /etc/ssh/ssh_config.
    assert session_config_text("/etc/remote acp/ssh_config", home="/home/u") == (
        "# Written by remote-acp: no connection sharing, the ssh_config ssh would read, then our defaults.\n"
        "ControlMaster no\n"
        "ControlPath none\n"
        'Include "/etc/remote acp/ssh_config"\n'
        "Host *\n"
        "  StrictHostKeyChecking accept-new\n"
    )
    assert session_config_text("none", home="/home/u") == (
        "# Written by remote-acp: no connection sharing, the ssh_config ssh would read, then our defaults.\n"
        "ControlMaster no\n"
        "ControlPath none\n"
        "Host *\n"
        "  StrictHostKeyChecking accept-new\n"
    )


def test_generated_config_without_our_host_key_fallback() -> None:
    # An explicit policy goes on the command line: the file only turns sharing off and includes.
    assert session_config_text("/etc/a", home="/home/u", host_key_fallback=False) == (
        "# Written by remote-acp: no connection sharing, the ssh_config ssh would read, then our defaults.\n"
        "ControlMaster no\n"
        "ControlPath none\n"
        'Include "/etc/a"\n'
    )


def test_fallback_config_escapes_paths_for_the_parser_and_for_glob() -> None:
    text = session_config_text('/c/it\'s "dq" * ? [x] back\\slash #h $v %p ~t', home="/h")
    assert text.split("\n")[3] == 'Include "/c/it\\\'s \\"dq\\" \\\\* \\\\? \\\\[x] back\\\\\\\\slash #h $v %p ~t"'


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
    config = write_fallback_config(session_config_text(str(user), home="/nonexistent"), tmp_path / "cache")
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
        config = write_fallback_config(session_config_text(str(tmp_path / name / "config"), home="/h"), tmp_path / "c")
        done = subprocess.run([ssh, "-G", "-F", str(config), "h"], capture_output=True, text=True, check=True)
        assert "user included" in done.stdout.splitlines(), name
    (tmp_path / "st*ar" / "config").unlink()
    config = write_fallback_config(session_config_text(str(tmp_path / "st*ar" / "config"), home="/h"), tmp_path / "c")
    done = subprocess.run([ssh, "-G", "-F", str(config), "h"], capture_output=True, text=True, check=True)
    assert "user decoy" not in done.stdout.splitlines()


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs OpenSSH's ssh")
def test_real_ssh_reads_the_users_config_under_the_login_home(tmp_path: Path) -> None:
    ssh = shutil.which("ssh")
    assert ssh is not None
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text("Host build\n  StrictHostKeyChecking ask\n")
    config = write_fallback_config(session_config_text(None, home=str(tmp_path)), tmp_path / "cache")
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
    lines = host_runs(tmp_path / "bin" / "ssh-argv.log")
    assert lines[:7] == ["-F", "/cfg", "-G", "-p", "22", "--", "b"]


def test_fallback_config_is_written_once_under_its_content_address(tmp_path: Path) -> None:
    directory = tmp_path / "cache dir" / "ssh"
    text = session_config_text(None, home="/home/u")
    path = write_fallback_config(text, directory)
    assert path == directory / f"config-{hashlib.sha256(text.encode()).hexdigest()[:32]}"
    assert path.read_text() == text
    assert directory.stat().st_mode & 0o777 == 0o700
    assert path.stat().st_mode & 0o777 == 0o600
    before = path.stat()
    assert write_fallback_config(text, directory) == path
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # not rewritten
    other = write_fallback_config(session_config_text("none", home="/home/u"), directory)
    assert other != path
    assert sorted(p.name for p in directory.iterdir()) == sorted([path.name, other.name])  # no temporaries left


def test_fallback_config_with_the_wrong_content_is_replaced(tmp_path: Path) -> None:
    text = session_config_text(None, home="/home/u")
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


# -- prepare and the ssh_config ----------------------------------------------------------------


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
    with caplog.at_level(logging.WARNING, logger="remote_acp.targets.ssh.target"):
        spec = prepare(SshTarget("build", environ=environ_with(tmp_path / "bin")), ["agent"], "/srv/ws")
    assert spec.argv[1:3] == ["-F", str(fallback_path(None))]
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
    config = fallback_path(str(tmp_path / "conf dir" / "my config"))
    assert spec.argv[1:3] == ["-F", str(config)]
    assert f'Include "{tmp_path}/conf dir/my config"\n' in config.read_text()


@pytest.mark.parametrize("config_file", ["none", "NONE", "/dev/null"])
def test_prepare_with_no_config_file_includes_nothing(tmp_path: Path, config_file: str) -> None:
    fake_ssh(tmp_path / "bin")
    settings = SshSettings(config_file=config_file)
    spec = prepare(SshTarget("build", settings, environ=environ_with(tmp_path / "bin")), ["agent"], "/srv/ws")
    config = fallback_path("none")
    assert spec.argv[1:3] == ["-F", str(config)]
    assert "Include" not in config.read_text()


def test_prepare_explicit_policy_and_config_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    fake_ssh(tmp_path / "bin", "stricthostkeychecking false\n")
    (tmp_path / "test ssh_config").write_text("")
    settings = SshSettings(host_key_policy="yes", config_file=str(tmp_path / "test ssh_config"))
    spec = prepare(SshTarget("build", settings, environ=environ_with(tmp_path / "bin")), ["agent"], "/srv/ws")
    config = fallback_path(str(tmp_path / "test ssh_config"), host_key_fallback=False)
    assert spec.argv[1:3] == ["-F", str(config)]  # the user's file, included
    assert f'Include "{tmp_path}/test ssh_config"\n' in config.read_text()
    assert [w for w in spec.argv if w.startswith("StrictHostKeyChecking=")] == ["StrictHostKeyChecking=yes"]
    assert not host_runs(tmp_path / "bin" / "ssh-argv.log")  # an explicit policy needs no `ssh -G` of the host
    assert not caplog.messages


def test_prepare_explicit_policy_without_config_file_includes_what_ssh_reads(tmp_path: Path) -> None:
    fake_ssh(tmp_path / "bin")
    settings = SshSettings(host_key_policy="no", force_insecure_host_keys=True)
    spec = prepare(SshTarget("build", settings, environ=environ_with(tmp_path / "bin")), ["agent"], "/srv/ws")
    assert spec.argv[1:3] == ["-F", str(fallback_path(None, host_key_fallback=False))]
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


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs OpenSSH's ssh")
def test_the_policy_is_asked_of_ssh_once_while_the_users_config_is_unchanged(tmp_path: Path) -> None:
    real = shutil.which("ssh")
    log = tmp_path / "runs.log"
    ssh = tmp_path / "ssh"
    ssh.write_text(f'#!/bin/sh\necho run >> "{log}"\nexec {real} "$@"\n')
    ssh.chmod(0o755)
    old = time.time() - 3600  # a file changed just before a run is never trusted with its answer
    (tmp_path / "conf").mkdir()
    user = tmp_path / "conf" / "user_config"
    user.write_text("Host strict\n  StrictHostKeyChecking ask\n")
    config = write_fallback_config(session_config_text(str(user), home="/nonexistent"), tmp_path / "configs")
    for path in (ssh, user, config, user.parent):  # the included file's directory is checked too
        os.utime(path, (old, old))
    cache = str(tmp_path / "ssh-g")
    environ = {"PATH": os.defpath}

    def policy(host: str) -> str | None:
        return anyio.run(
            functools.partial(effective_host_key_policy, cache=cache), str(ssh), Destination(host), str(config), environ
        )

    assert [policy("strict"), policy("strict"), policy("other")] == ["ask", "ask", "accept-new"]
    assert log.read_text().count("run") == 2  # strict once, other once
    user.write_text("Host strict\n  StrictHostKeyChecking no\n")  # the included file, edited
    os.utime(user, (old, old))
    assert policy("strict") == "no"
    assert log.read_text().count("run") == 3


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs OpenSSH's ssh")
def test_preparing_a_session_over_ssh_loads_no_inventory_machinery(tmp_path: Path) -> None:
    # The kept ssh -G answers live in hostinv; a session start must not pay for its inventory
    # models (pydantic) or YAML to read them.
    program = (
        "import json, sys, anyio\n"
        "from remote_acp.targets.ssh.target import SshSettings, SshTarget\n"
        "target = SshTarget('deploy@build.invalid:2222', SshSettings(config_file='none'))\n"
        "anyio.run(target.prepare, 'agent --acp', '/srv/ws')\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    env = {**os.environ, "REMOTE_ACP_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.splitlines()[-1])
    assert "hostinv.resolve_cache" in loaded  # the policy's ssh -G went through the kept answers
    assert [m for m in loaded if m.split(".")[0] in ("pydantic", "yaml") or m == "hostinv.models"] == []
