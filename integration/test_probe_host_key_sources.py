"""The sources of host keys ssh consults besides the known_hosts files, on the asyncssh path:
``RevokedHostKeys`` refuses the keys it lists (known or not), and a file no key can be checked
against refuses every key; a host whose key ssh verifies through ``KnownHostsCommand`` or DNS
(``VerifyHostKeyDNS``), which a probe does not consult, gets no key written and none trusted but
those the known_hosts files hold.

Each case writes an ssh_config of its own, probes a lab host, and asks the real ``ssh`` the same
question where it answers without the network, so the two paths are seen to agree (or the probe
to be the stricter).
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import anyio
import pytest

from hostinv import Host
from hostinv.causes import Cause
from hostinv.probes import HostProbe, ProbeSettings, Verdict, probe_host

if TYPE_CHECKING:
    from pathlib import Path

    from integration.sshlab import SshHost, SshLab

pytestmark = [pytest.mark.anyio, pytest.mark.process]

BOUND_S = 60


def config_with(lab: SshLab, root: Path, known: list[str], head: str) -> tuple[Path, Path]:
    """The lab's ssh_config reading ``root/kh_user`` (holding ``known``), ``head`` first."""
    known_hosts = root / "kh_user"
    known_hosts.write_text("".join(f"{line}\n" for line in known))
    config = lab.config_variant(root / "ssh_config", known_hosts=known_hosts)
    config.write_text(head + config.read_text())
    return config, known_hosts


def real_ssh(config: Path, alias: str = "lab1") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ssh", "-F", str(config), "-o", "BatchMode=yes", alias, "true"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def probe(config: Path, *, cache: Path | None = None, host: str = "lab1") -> HostProbe:
    settings = ProbeSettings(
        ssh_config=str(config), connect_timeout_s=15, resolve_cache=str(cache) if cache is not None else None
    )
    with anyio.fail_after(BOUND_S):
        return await probe_host(Host(name=host), "sh", "", settings)


def other_key(lab: SshLab, host: SshHost, root: Path) -> str:
    """``host``'s known_hosts name with a key it does not have."""
    return lab.other_key_line(host, root)


def own_public_key(host: SshHost) -> str:
    return host.host_key.with_suffix(".pub").read_text()


# -- KnownHostsCommand ---------------------------------------------------------------------------


@pytest.mark.parametrize("cached", [False, True], ids=["asked", "kept"])
async def test_a_known_hosts_command_vouching_another_key_keeps_the_probe_from_writing_it(
    ssh_lab: SshLab, tmp_path: Path, cached: bool
) -> None:
    # The reviewer's case: the command vouches for another key, the file is empty, accept-new.
    lab1 = ssh_lab.host("lab1")
    vouched = tmp_path / "kh_vouched"
    vouched.write_text(other_key(ssh_lab, lab1, tmp_path) + "\n")
    head = f"Host lab1\n  KnownHostsCommand /bin/cat {vouched}\n  StrictHostKeyChecking accept-new\n"
    config, known_hosts = config_with(ssh_lab, tmp_path, [], head)
    refused = real_ssh(config)
    assert refused.returncode == 255 and "Host key verification failed" in refused.stderr, refused.stderr
    assert "has changed" in refused.stderr
    for _ in range(2 if cached else 1):
        result = await probe(config, cache=tmp_path / "cache" if cached else None)
        assert result.verdict is Verdict.HOST_KEY_UNKNOWN, result.message
        assert result.cause is Cause.HOST_KEY_UNKNOWN
        assert "KnownHostsCommand" in result.message and "check host" in result.message
        assert "nothing written" in result.message
        assert known_hosts.read_text() == ""
    assert real_ssh(config).returncode == 255  # ssh still refuses the host: nothing was made trusted


async def test_a_known_hosts_command_vouching_the_key_is_not_taken_on_trust(ssh_lab: SshLab, tmp_path: Path) -> None:
    # ssh trusts the key the command vouches for; the probe, which does not run it, fails closed.
    lab1 = ssh_lab.host("lab1")
    vouched = tmp_path / "kh_vouched"
    vouched.write_text(lab1.known_hosts_line + "\n")
    head = f"Host lab1\n  KnownHostsCommand /bin/cat {vouched}\n"
    config, known_hosts = config_with(ssh_lab, tmp_path, [], head)
    assert real_ssh(config).returncode == 0
    assert known_hosts.read_text() == ""  # ssh wrote nothing either
    result = await probe(config)
    assert result.verdict is Verdict.HOST_KEY_UNKNOWN, result.message
    assert known_hosts.read_text() == ""


async def test_a_known_hosts_command_leaves_a_key_the_files_hold_trusted(ssh_lab: SshLab, tmp_path: Path) -> None:
    lab1 = ssh_lab.host("lab1")
    head = "Host lab1\n  KnownHostsCommand /bin/true\n"
    config, known_hosts = config_with(ssh_lab, tmp_path, [lab1.known_hosts_line], head)
    assert real_ssh(config).returncode == 0
    result = await probe(config)
    assert result.verdict is Verdict.READY, result.message
    assert known_hosts.read_text() == f"{lab1.known_hosts_line}\n"


async def test_a_known_hosts_command_for_another_host_changes_nothing(ssh_lab: SshLab, tmp_path: Path) -> None:
    # accept-new still adds a truly unknown key when nothing else says otherwise.
    head = "Host lab2\n  KnownHostsCommand /bin/true\n"
    config, known_hosts = config_with(ssh_lab, tmp_path, [], head)
    result = await probe(config)
    assert result.verdict is Verdict.READY, result.message
    assert known_hosts.read_text().startswith(f"[{ssh_lab.host('lab1').address}]:")


# -- VerifyHostKeyDNS ------------------------------------------------------------------------------


@pytest.mark.parametrize("setting", ["yes", "ask"])
async def test_a_host_ssh_checks_through_dns_gets_no_key_written(ssh_lab: SshLab, tmp_path: Path, setting: str) -> None:
    # ssh would look the key up as SSHFP records (not asked here: the lab has no DNS).
    head = f"Host lab1\n  VerifyHostKeyDNS {setting}\n  StrictHostKeyChecking accept-new\n"
    config, known_hosts = config_with(ssh_lab, tmp_path, [], head)
    result = await probe(config)
    assert result.verdict is Verdict.HOST_KEY_UNKNOWN, result.message
    assert "DNS" in result.message and "nothing written" in result.message
    assert known_hosts.read_text() == ""


async def test_dns_verification_off_leaves_accept_new_as_it_was(ssh_lab: SshLab, tmp_path: Path) -> None:
    head = "Host lab1\n  VerifyHostKeyDNS no\n"
    config, known_hosts = config_with(ssh_lab, tmp_path, [], head)
    result = await probe(config)
    assert result.verdict is Verdict.READY, result.message
    assert known_hosts.read_text() != ""


# -- RevokedHostKeys -------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["yes", "accept-new"])
async def test_a_revoked_key_the_files_hold_is_refused(ssh_lab: SshLab, tmp_path: Path, policy: str) -> None:
    lab1 = ssh_lab.host("lab1")
    revoked = tmp_path / "revoked.pub"
    revoked.write_text(own_public_key(lab1))
    head = f"Host lab1\n  RevokedHostKeys {revoked}\n  StrictHostKeyChecking {policy}\n"
    config, known_hosts = config_with(ssh_lab, tmp_path, [lab1.known_hosts_line], head)
    refused = real_ssh(config)
    assert refused.returncode == 255 and "revoked by file" in refused.stderr, refused.stderr
    result = await probe(config)
    assert result.verdict is Verdict.HOST_KEY_CHANGED, result.message
    assert result.cause is Cause.HOST_KEY_CHANGED
    assert "revoked" in result.message and str(revoked) in result.message
    assert known_hosts.read_text() == f"{lab1.known_hosts_line}\n"


async def test_a_revoked_key_no_file_holds_is_neither_trusted_nor_written(ssh_lab: SshLab, tmp_path: Path) -> None:
    lab1 = ssh_lab.host("lab1")
    revoked = tmp_path / "revoked.pub"
    revoked.write_text(f"# revoked keys\n\n  {own_public_key(lab1)}")
    head = f"Host lab1\n  RevokedHostKeys {revoked}\n  StrictHostKeyChecking accept-new\n"
    config, known_hosts = config_with(ssh_lab, tmp_path, [], head)
    refused = real_ssh(config)
    assert refused.returncode == 255 and "revoked by file" in refused.stderr, refused.stderr
    result = await probe(config)
    assert result.verdict is Verdict.HOST_KEY_CHANGED, result.message
    assert known_hosts.read_text() == ""


@pytest.mark.parametrize("written", [False, True], ids=["expanded", "as-written"])
async def test_a_path_with_tokens_is_read_as_any_ssh_would_read_it(
    ssh_lab: SshLab, tmp_path: Path, written: bool
) -> None:
    # OpenSSH 9.2 opens the path as written; later releases expand %h, %n, ~ and ${VAR} in it.
    # The probe reads both, and refuses a key either lists.
    lab1 = ssh_lab.host("lab1")
    name = "revoked-%h-%n.pub" if written else f"revoked-{lab1.address}-lab1.pub"
    (tmp_path / name).write_text(own_public_key(lab1))
    head = f"Host lab1\n  RevokedHostKeys {tmp_path}/revoked-%h-%n.pub\n"
    config, _ = config_with(ssh_lab, tmp_path, [lab1.known_hosts_line], head)
    assert real_ssh(config).returncode == 255  # revoked, or (9.2, expanded) no file: every key refused
    result = await probe(config)
    assert result.verdict is Verdict.HOST_KEY_CHANGED, result.message
    assert "revoked" in result.message


async def test_a_revoked_list_without_the_host_key_lets_it_in(ssh_lab: SshLab, tmp_path: Path) -> None:
    lab1, lab2 = ssh_lab.host("lab1"), ssh_lab.host("lab2")
    revoked = tmp_path / "revoked.pub"
    revoked.write_text(own_public_key(lab2))
    head = f"Host lab1\n  RevokedHostKeys {revoked}\n"
    config, known_hosts = config_with(ssh_lab, tmp_path, [], head)
    result = await probe(config)  # accept-new adds the key, as ssh would
    assert result.verdict is Verdict.READY, result.message
    assert known_hosts.read_text().split(" ")[0] == f"[{lab1.address}]:{lab1.port}"
    assert real_ssh(config).returncode == 0


async def test_a_revoked_list_that_cannot_be_read_refuses_every_key(ssh_lab: SshLab, tmp_path: Path) -> None:
    lab1 = ssh_lab.host("lab1")
    missing = tmp_path / "no-such-file"
    head = f"Host lab1\n  RevokedHostKeys {missing}\n"
    config, known_hosts = config_with(ssh_lab, tmp_path, [lab1.known_hosts_line], head)
    refused = real_ssh(config)
    assert refused.returncode == 255 and "Host key verification failed" in refused.stderr, refused.stderr
    result = await probe(config)
    assert result.verdict is not Verdict.READY, result.message
    assert result.cause is Cause.SSH_CONFIG_INVALID
    assert "RevokedHostKeys" in result.message and "cannot be read" in result.message
    assert known_hosts.read_text() == f"{lab1.known_hosts_line}\n"


async def test_a_revoked_list_with_a_line_ssh_cannot_read_refuses_every_key(ssh_lab: SshLab, tmp_path: Path) -> None:
    lab1 = ssh_lab.host("lab1")
    revoked = tmp_path / "revoked.pub"
    revoked.write_text("not a key\n")
    head = f"Host lab1\n  RevokedHostKeys {revoked}\n"
    config, _ = config_with(ssh_lab, tmp_path, [lab1.known_hosts_line], head)
    assert real_ssh(config).returncode == 255
    result = await probe(config)
    assert result.verdict is not Verdict.READY, result.message
    assert "line 1" in result.message


@pytest.mark.parametrize("lists_lab1", [False, True], ids=["other-key", "own-key"])
async def test_a_binary_krl_is_not_trusted_blindly(ssh_lab: SshLab, tmp_path: Path, lists_lab1: bool) -> None:
    lab1, lab2 = ssh_lab.host("lab1"), ssh_lab.host("lab2")
    listed = tmp_path / "listed.pub"
    listed.write_text(own_public_key(lab1 if lists_lab1 else lab2))
    krl = tmp_path / "revoked.krl"
    await anyio.run_process(["ssh-keygen", "-q", "-k", "-f", str(krl), str(listed)])
    head = f"Host lab1\n  RevokedHostKeys {krl}\n"
    config, known_hosts = config_with(ssh_lab, tmp_path, [lab1.known_hosts_line], head)
    assert real_ssh(config).returncode == (255 if lists_lab1 else 0)
    result = await probe(config)  # the probe cannot read a KRL: it trusts no key
    assert result.verdict is Verdict.HOST_KEY_UNKNOWN, result.message
    assert result.cause is Cause.HOST_KEY_UNKNOWN
    assert "KRL" in result.message and "check host" in result.message
    assert known_hosts.read_text() == f"{lab1.known_hosts_line}\n"


async def test_a_revoked_jump_host_key_is_refused(ssh_lab: SshLab, tmp_path: Path) -> None:
    lab1, lab2 = ssh_lab.host("lab1"), ssh_lab.host("lab2")
    revoked = tmp_path / "revoked.pub"
    revoked.write_text(own_public_key(lab2))
    head = f"Host lab2\n  RevokedHostKeys {revoked}\nHost lab1\n  ProxyJump lab2\n"
    config, _ = config_with(ssh_lab, tmp_path, [lab1.known_hosts_line, lab2.known_hosts_line], head)
    assert real_ssh(config).returncode == 255
    result = await probe(config)
    assert result.verdict is Verdict.HOST_KEY_CHANGED, result.message
    assert "jump host lab2" in result.message
