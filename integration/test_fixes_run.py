"""Every fix ``check host`` prints that is a command runs as printed, against a real sshd, and does
what it says: the host is ready afterwards (an unknown host key accepted, a missing workspace
made), or its words name the very host that was checked, through the same ssh_config
(``ssh-copy-id``, which needs a login this test cannot give it, is read back through ``ssh -G``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any

from hostinv.causes import fix_command
from tests.support.cli import AGENT

if TYPE_CHECKING:
    from pathlib import Path

    from integration.sshlab import SshLab

CLI = [sys.executable, "-m", "remote_acp.cli.main"]


def check(env: dict[str, str], config: Path, *args: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [*CLI, "check", "host", *args, "--json", "--ssh-config", str(config), "--agent", AGENT],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    (line,) = done.stdout.splitlines()
    return done.returncode, json.loads(line)


def strict_config(ssh_lab: SshLab, tmp_path: Path, known_hosts: Path) -> Path:
    """An ssh_config as a person's would be: the lab's key, a known_hosts file, a strict policy."""
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host *\n  User root\n  IdentityFile {ssh_lab.client_key}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {known_hosts}\n  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n"
    )
    return config


def environment(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "REMOTE_ACP_CACHE_DIR": str(tmp_path / "cache"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}


def run_as_printed(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/sh", "-c", command], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False
    )


def test_the_unknown_host_key_fix_accepts_the_key_and_the_host_is_ready(ssh_lab: SshLab, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text("")
    config, env = strict_config(ssh_lab, tmp_path, known), environment(tmp_path)
    lab1 = ssh_lab.host("lab1")
    target = f"root@{lab1.address}:{lab1.port}"
    status, seen = check(env, config, target, "--workspace", "/tmp")
    assert (status, seen["verdict"], seen["cause"]) == (20, "host_key_unknown", "host_key_unknown"), seen
    command = fix_command(seen["fix"])
    assert command == f"ssh -o StrictHostKeyChecking=accept-new -F {config} -p {lab1.port} root@{lab1.address} true"
    done = run_as_printed(command)
    assert done.returncode == 0, done.stderr
    assert known.read_text().strip()  # the key is known now, where the check looks
    status, seen = check(env, config, target, "--workspace", "/tmp")
    assert (status, seen["verdict"]) == (0, "ready"), seen


def test_the_missing_workspace_fix_makes_it_and_the_host_is_ready(ssh_lab: SshLab, tmp_path: Path) -> None:
    config, env = strict_config(ssh_lab, tmp_path, ssh_lab.known_hosts), environment(tmp_path)
    lab1 = ssh_lab.host("lab1")
    target = f"root@{lab1.address}:{lab1.port}"
    workspace = str(tmp_path / "made by the fix's $HOME 'quoted'")
    status, seen = check(env, config, target, "--workspace", workspace)
    assert (status, seen["verdict"], seen["cause"]) == (21, "workspace_invalid", "workspace_invalid"), seen
    command = fix_command(seen["fix"])
    assert command is not None and command.startswith("mkdir -p -- ")
    # The host is this machine: the fix, run here as printed, makes the directory there.
    assert run_as_printed(command).returncode == 0
    assert os.path.isdir(workspace)
    status, seen = check(env, config, target, "--workspace", workspace)
    assert (status, seen["verdict"]) == (0, "ready"), seen


def test_the_auth_fix_names_the_host_that_was_checked(ssh_lab: SshLab, tmp_path: Path) -> None:
    config, env = strict_config(ssh_lab, tmp_path, ssh_lab.known_hosts), environment(tmp_path)
    lab1 = ssh_lab.host("lab1")
    target = f"nobody-here@{lab1.address}:{lab1.port}"
    _, seen = check(env, config, target, "--workspace", "/tmp")
    assert (seen["verdict"], seen["cause"]) == ("auth_failed", "auth_failed"), seen
    command = fix_command(seen["fix"])
    assert command == f"ssh-copy-id -F {config} -p {lab1.port} nobody-here@{lab1.address}"
    # ssh-copy-id hands these words to ssh: ssh -G says where they lead.
    resolved = subprocess.run(["ssh", "-G", *command.split()[1:]], capture_output=True, text=True, timeout=30)
    said = dict(line.split(" ", 1) for line in resolved.stdout.splitlines() if " " in line)
    assert (said["hostname"], said["port"], said["user"]) == (lab1.address, str(lab1.port), "nobody-here")
    assert said["identityfile"] == str(ssh_lab.client_key)  # through the same ssh_config
