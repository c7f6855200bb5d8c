"""The local ssh argv, as data."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from typing import TYPE_CHECKING

import pytest

from remote_acp.targets.ssh import (
    Destination,
    HostKeyPolicy,
    SshSettings,
    fallback_config_text,
    ssh_argv,
)
from remote_acp.targets.ssh_config import write_fallback_config
from tests.support.ssh_build import (
    BASE_OPTIONS,
    CONTROL_OPTIONS,
    RUN_TIMEOUT_S,
)

if TYPE_CHECKING:
    from pathlib import Path

# -- ssh_argv -----------------------------------------------------------------------------------


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
        *CONTROL_OPTIONS,
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
        *CONTROL_OPTIONS,
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
        *CONTROL_OPTIONS,
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
        *CONTROL_OPTIONS,
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
        *CONTROL_OPTIONS,
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


# -- no connection sharing ----------------------------------------------------------------------

SHARING_CONFIG = "Host *\n  ControlMaster auto\n  ControlPath {dir}/cm-%C\n  ControlPersist 600\n"


def ssh_g(argv: list[str]) -> dict[str, str]:
    """What ``ssh -G`` says the argv would use (ssh reads its config and connects nowhere)."""
    done = subprocess.run(
        [argv[0], "-G", *argv[1:]], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
    )
    assert done.returncode == 0, done.stderr
    return dict(line.partition(" ")[::2] for line in done.stdout.splitlines())


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs OpenSSH's ssh")
@pytest.mark.parametrize("policy", [None, "yes"])
def test_a_users_control_master_cannot_turn_sharing_back_on(tmp_path: Path, policy: HostKeyPolicy | None) -> None:
    user = tmp_path / "user config"
    user.write_text(SHARING_CONFIG.format(dir=tmp_path))
    # The negative control: read alone, the user's file shares connections.
    control = ssh_g(["ssh", "-F", str(user), "build"])
    assert control["controlmaster"] == "auto" and control["controlpath"].startswith(f"{tmp_path}/cm-")
    settings = SshSettings(host_key_policy=policy, config_file=str(user))
    text = fallback_config_text(str(user), home="/x", host_key_fallback=policy is None)
    config = str(write_fallback_config(text, tmp_path))
    seen = ssh_g(ssh_argv("ssh", Destination("build"), settings, "true", config=config))
    assert seen["controlmaster"] == "false"  # never a master
    assert "controlpath" not in seen  # `none`: never a client of someone else's master
    # A ProxyJump hop's ssh gets our -F file but none of our -o options: the file alone holds.
    hop = ssh_g(["ssh", "-F", config, "jumphost"])
    assert hop["controlmaster"] == "false" and "controlpath" not in hop
