"""The probe's host-key policy against real sshd hosts: the policy ssh's configuration sets for a
host (as ``ssh -G`` reports it) holds on the asyncssh path too, a caller's ``accept-new`` (the
default) never loosens it, and a key the policy did not allow is never written.

Each case writes an ssh_config and a known_hosts file of its own, probes a lab host, and asks
the real ``ssh`` the same question, so the two paths are seen to agree.
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import anyio
import pytest

from hostinv import Host
from hostinv.causes import Cause
from hostinv.probes import ProbeSettings, Verdict, probe_host

if TYPE_CHECKING:
    from pathlib import Path

    from integration.sshlab import SshLab

pytestmark = pytest.mark.anyio

BOUND_S = 60


def config_with(lab: SshLab, root: Path, known: list[str], head: str = "") -> tuple[Path, Path]:
    """The lab's ssh_config reading ``root/known_hosts`` (holding ``known``), ``head`` first."""
    known_hosts = root / "known_hosts"
    known_hosts.write_text("".join(f"{line}\n" for line in known))
    config = lab.config_variant(root / "ssh_config", known_hosts=known_hosts)
    config.write_text(head + config.read_text())
    return config, known_hosts


def real_ssh(config: Path, alias: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ssh", "-F", str(config), "-o", "BatchMode=yes", alias, "true"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    "head",
    [
        "Host *\n  StrictHostKeyChecking yes\n",
        "Host lab1\n  StrictHostKeyChecking ask\n",
        'Host lab1\n  StrictHostKeyChecking "true"\n',
        "Match originalhost lab1\n  StrictHostKeyChecking=yes\n",
    ],
    ids=["yes", "ask", "quoted-true", "match-block"],
)
@pytest.mark.parametrize("cached", [False, True], ids=["asked", "kept"])
async def test_a_config_that_refuses_new_keys_is_obeyed_and_nothing_is_written(
    ssh_lab: SshLab, tmp_path: Path, head: str, cached: bool
) -> None:
    config, known_hosts = config_with(ssh_lab, tmp_path, [], head)
    assert real_ssh(config, "lab1").returncode == 255  # ssh refuses the host ...
    assert known_hosts.read_text() == ""
    settings = ProbeSettings(  # ... and the default (accept-new) does not loosen that
        ssh_config=str(config),
        connect_timeout_s=15,
        resolve_cache=str(tmp_path / "cache") if cached else None,
    )
    for _ in range(2 if cached else 1):  # the second answer comes from the cache when kept
        with anyio.fail_after(BOUND_S):
            result = await probe_host(Host(name="lab1"), "sh", "", settings)
        assert result.verdict is Verdict.HOST_KEY_UNKNOWN, result.message
        assert result.cause is Cause.HOST_KEY_UNKNOWN
        assert "StrictHostKeyChecking" in result.message and "nothing written" in result.message
        assert known_hosts.read_text() == ""


async def test_an_inventory_option_that_refuses_new_keys_is_obeyed(ssh_lab: SshLab, tmp_path: Path) -> None:
    config, known_hosts = config_with(ssh_lab, tmp_path, [])
    settings = ProbeSettings(ssh_config=str(config), connect_timeout_s=15)
    host = Host(name="lab1", ssh_options={"StrictHostKeyChecking": "yes"})
    with anyio.fail_after(BOUND_S):
        result = await probe_host(host, "sh", "", settings)
    assert result.verdict is Verdict.HOST_KEY_UNKNOWN, result.message
    assert known_hosts.read_text() == ""


async def test_a_caller_may_tighten_a_config_that_accepts_new_keys(ssh_lab: SshLab, tmp_path: Path) -> None:
    config, known_hosts = config_with(ssh_lab, tmp_path, [], "Host lab1\n  StrictHostKeyChecking accept-new\n")
    settings = ProbeSettings(ssh_config=str(config), connect_timeout_s=15, host_key_policy="yes")
    with anyio.fail_after(BOUND_S):
        result = await probe_host(Host(name="lab1"), "sh", "", settings)
    assert result.verdict is Verdict.HOST_KEY_UNKNOWN, result.message
    assert "asked for is 'yes'" in result.message
    assert known_hosts.read_text() == ""


@pytest.mark.parametrize(
    "head", ["", "Host lab1\n  StrictHostKeyChecking accept-new\n", "Host lab1\n  StrictHostKeyChecking no\n"]
)
async def test_a_config_that_accepts_new_keys_gets_the_key_written(ssh_lab: SshLab, tmp_path: Path, head: str) -> None:
    # Nothing set is ssh's "ask" in ssh -G's words, but our default (accept-new) for sessions and
    # probes alike; "no" is held to accept-new (a changed key is refused whatever).
    config, known_hosts = config_with(ssh_lab, tmp_path, [], head)
    settings = ProbeSettings(ssh_config=str(config), connect_timeout_s=15)
    with anyio.fail_after(BOUND_S):
        result = await probe_host(Host(name="lab1"), "sh", "", settings)
    assert result.verdict is Verdict.READY, result.message
    lab1 = ssh_lab.host("lab1")
    assert known_hosts.read_text().split(" ")[0] == f"[{lab1.address}]:{lab1.port}"
    assert real_ssh(config, "lab1").returncode == 0


async def test_a_jump_host_the_config_is_strict_for_is_refused_and_not_written(ssh_lab: SshLab, tmp_path: Path) -> None:
    # lab1 is known, the jump host lab2 is not, and the config is strict for the jump host only.
    lab1 = ssh_lab.host("lab1")
    head = "Host lab2\n  StrictHostKeyChecking yes\nHost lab1\n  ProxyJump lab2\n"
    config, known_hosts = config_with(ssh_lab, tmp_path, [lab1.known_hosts_line], head)
    assert real_ssh(config, "lab1").returncode == 255
    settings = ProbeSettings(ssh_config=str(config), connect_timeout_s=15)
    with anyio.fail_after(BOUND_S):
        result = await probe_host(Host(name="lab1"), "sh", "", settings)
    assert result.verdict is Verdict.HOST_KEY_UNKNOWN, result.message
    assert "jump host lab2" in result.message
    assert known_hosts.read_text() == f"{lab1.known_hosts_line}\n"


async def test_a_config_file_ssh_cannot_read_is_reported_in_its_words(tmp_path: Path) -> None:
    settings = ProbeSettings(ssh_config=str(tmp_path / "missing"), connect_timeout_s=5)
    with anyio.fail_after(BOUND_S):
        result = await probe_host(Host(name="lab1"), "sh", "", settings)
    assert result.verdict is Verdict.UNREACHABLE and result.cause is Cause.SSH_CONFIG_INVALID
    assert str(tmp_path / "missing") in result.message
