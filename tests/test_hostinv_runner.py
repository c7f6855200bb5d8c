"""The probe runner's pure parts: what ``ssh -G`` says (run for real on configs written here),
jump hops, known_hosts lines as ssh writes them (checked with the real ``ssh-keygen``), the
host key decision, and exceptions turned into verdicts a person can act on. The connections
themselves are tested against real sshd in ``integration/test_hostinv_probe.py``."""

from __future__ import annotations

import asyncio
import errno
import os
import pwd
import socket
import stat
import subprocess
from typing import TYPE_CHECKING

import asyncssh
import pytest

from hostinv import Host
from hostinv.probes import (
    CONNECTION_VERDICTS,
    HostKeyCheck,
    ProbeSettings,
    Verdict,
    judge_connect_error,
    probe_hosts,
)
from hostinv.sshopts import (
    ResolvedSsh,
    known_hosts_line,
    known_hosts_name,
    parse_jump,
    parse_ssh_g,
    probe_ciphers,
    ssh_g_argv,
)

if TYPE_CHECKING:
    from pathlib import Path

KEY_B64 = "AAAAC3NzaC1lZDI1NTE5AAAAIOmR0Y0K4p3d8E0sQ5CbKc3q3xH4iWk2kGz5m3zq0d1F"


HOME = pwd.getpwuid(os.getuid()).pw_dir  # ssh expands ~ to the account's home, not $HOME


def ssh_g(argv: list[str]) -> ResolvedSsh:
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30, check=True)
    return parse_ssh_g(done.stdout)


CONFIG = """\
Host build-1
  HostName 10.0.0.5
  Port 2222
  User deploy
  IdentityFile ~/.ssh/build_key
  IdentitiesOnly yes
  UserKnownHostsFile ~/.ssh/fleet_hosts ~/.ssh/more_hosts
  GlobalKnownHostsFile none
  HashKnownHosts yes
  ProxyJump jump@bastion:2200

Host aliased
  HostKeyAlias the-alias
  UserKnownHostsFile none
  Ciphers aes256-ctr,aes128-ctr
"""


@pytest.mark.process
def test_ssh_g_output_is_read_as_ssh_would_use_it(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(CONFIG)
    got = ssh_g(ssh_g_argv("build-1", config=str(config)))
    assert (got.hostname, got.port, got.user) == ("10.0.0.5", 2222, "deploy")
    assert got.identity_files == (f"{HOME}/.ssh/build_key",)
    assert got.identities_only
    assert got.user_known_hosts == (f"{HOME}/.ssh/fleet_hosts", f"{HOME}/.ssh/more_hosts")
    assert got.global_known_hosts == ()
    assert got.hash_known_hosts
    assert got.proxy_jump == "jump@bastion:2200"
    assert got.known_hosts_name == "[10.0.0.5]:2222"

    aliased = ssh_g(ssh_g_argv("aliased", config=str(config)))
    assert aliased.host_key_alias == "the-alias" and aliased.known_hosts_name == "the-alias"
    assert aliased.user_known_hosts == ()  # "none": no file, which the runner then neither reads nor writes
    assert aliased.proxy_jump is None and not aliased.hash_known_hosts
    assert aliased.ciphers == ("aes256-ctr", "aes128-ctr")
    assert "chacha20-poly1305@openssh.com" in got.ciphers  # ssh's own defaults: it always says


@pytest.mark.process
def test_the_hosts_own_fields_override_the_config_as_on_the_command_line(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(CONFIG)
    key = tmp_path / "ci_key"
    key.write_text("")  # ssh drops an -i file that does not exist
    argv = ssh_g_argv(
        "build-1",
        config=str(config),
        port=2022,
        user="ci",
        identity_file=str(key),
        options={"ProxyJump": "none", "HashKnownHosts": "no"},
    )
    assert argv[-2:] == ["--", "build-1"]
    got = ssh_g(argv)
    assert (got.hostname, got.port, got.user) == ("10.0.0.5", 2022, "ci")
    assert got.identity_files[0] == str(key)  # offered first, as with ssh -i
    assert got.proxy_jump is None and not got.hash_known_hosts


def test_output_that_is_not_ssh_g_is_refused() -> None:
    with pytest.raises(ValueError, match="not ssh -G output"):
        parse_ssh_g("Bad configuration option: frobnicate\n")


@pytest.mark.parametrize(
    ("hop", "expected"),
    [
        ("bastion", ("bastion", None, None)),
        ("jump@bastion:2200", ("bastion", 2200, "jump")),
        ("ssh://ops@10.1.1.1:22", ("10.1.1.1", 22, "ops")),
        ("[fe80::1]:2222", ("fe80::1", 2222, None)),
        ("a@b@gw", ("gw", None, "a@b")),
    ],
)
def test_jump_hops(hop: str, expected: tuple[str, int | None, str | None]) -> None:
    assert parse_jump(hop) == expected


def test_known_hosts_names_follow_ssh() -> None:
    assert known_hosts_name("h.example", 22) == "h.example"
    assert known_hosts_name("h.example", None) == "h.example"
    assert known_hosts_name("10.0.0.5", 2222) == "[10.0.0.5]:2222"


@pytest.mark.parametrize("hashed", [False, True])
@pytest.mark.process
def test_a_known_hosts_line_is_found_by_ssh_keygen(tmp_path: Path, hashed: bool) -> None:
    path = tmp_path / "known_hosts"
    path.write_text(known_hosts_line("[10.0.0.5]:2222", "ssh-ed25519", KEY_B64, hashed=hashed))
    assert path.read_text().startswith("|1|" if hashed else "[10.0.0.5]:2222 ")
    found = subprocess.run(["ssh-keygen", "-F", "[10.0.0.5]:2222", "-f", str(path)], capture_output=True, text=True)
    assert found.returncode == 0 and KEY_B64 in found.stdout
    other = subprocess.run(["ssh-keygen", "-F", "[10.0.0.5]:2223", "-f", str(path)], capture_output=True, text=True)
    assert other.returncode == 1


def resolved() -> ResolvedSsh:
    return ResolvedSsh(hostname="10.0.0.5", port=2222, user="deploy")


def test_accept_new_adds_the_key_where_ssh_would_creating_the_directory(tmp_path: Path) -> None:
    target = tmp_path / "new" / ".ssh" / "known_hosts"
    check = HostKeyCheck(resolved(), "accept-new", (), str(target))
    assert check.decide("10.0.0.5", "ssh-ed25519", KEY_B64, lambda _path: False)
    assert check.outcome == "added"
    assert target.read_text() == f"[10.0.0.5]:2222 ssh-ed25519 {KEY_B64}\n"
    assert stat.S_IMODE(target.parent.stat().st_mode) == 0o700


def test_an_added_line_starts_on_a_line_of_its_own(tmp_path: Path) -> None:
    target = tmp_path / "known_hosts"
    target.write_text("other ssh-ed25519 AAAA")  # no final newline, as a hand edit may leave it
    check = HostKeyCheck(resolved(), "accept-new", (str(target),), str(target))
    assert check.decide("10.0.0.5", "ssh-ed25519", KEY_B64, lambda _path: False)
    assert target.read_text().splitlines() == ["other ssh-ed25519 AAAA", f"[10.0.0.5]:2222 ssh-ed25519 {KEY_B64}"]


def test_yes_refuses_an_unknown_key_and_writes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "known_hosts"
    check = HostKeyCheck(resolved(), "yes", (), str(target))
    assert not check.decide("10.0.0.5", "ssh-ed25519", KEY_B64, lambda _path: False)
    assert check.outcome == "unknown" and not target.exists()


@pytest.mark.parametrize("policy", ["accept-new", "yes"])
def test_another_key_for_the_host_is_a_changed_key_whatever_the_policy(tmp_path: Path, policy: str) -> None:
    user, system = tmp_path / "user_hosts", tmp_path / "global_hosts"
    user.write_text("")
    system.write_text("")
    check = HostKeyCheck(resolved(), policy, (str(user), str(system)), str(user))  # type: ignore[arg-type]
    assert not check.decide("10.0.0.5", "ssh-ed25519", KEY_B64, lambda path: path == str(system))
    assert (check.outcome, check.found_in) == ("changed", str(system))
    assert user.read_text() == ""
    judged = judge_connect_error(
        asyncssh.HostKeyNotVerifiable("Host key is not trusted"),
        destination="deploy@build-1",
        address="10.0.0.5",
        port=2222,
        connect_timeout_s=10,
        key_check=check,
    )
    assert judged.verdict is Verdict.HOST_KEY_CHANGED
    assert judged.fix is not None and f"ssh-keygen -f {system} -R '[10.0.0.5]:2222'" in judged.fix
    assert str(system) in judged.message


def test_an_unwritable_file_under_accept_new_is_an_unknown_key(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    check = HostKeyCheck(resolved(), "accept-new", (), str(blocker / "known_hosts"))
    assert not check.decide("10.0.0.5", "ssh-ed25519", KEY_B64, lambda _path: False)
    assert check.outcome == "unknown"


def judge(exc: BaseException, via: str | None = None) -> tuple[Verdict, str, str | None]:
    j = judge_connect_error(
        exc, destination="deploy@build-1", address="10.0.0.5", port=2222, connect_timeout_s=7, via=via
    )
    return j.verdict, j.message, j.fix


@pytest.mark.parametrize(
    ("exc", "verdict", "says"),
    [
        (socket.gaierror(socket.EAI_NONAME, "Name or service not known"), Verdict.UNREACHABLE, "did not resolve"),
        (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), Verdict.UNREACHABLE, "refused"),
        (TimeoutError(), Verdict.UNREACHABLE, "within 7 s"),
        (asyncio.TimeoutError(), Verdict.UNREACHABLE, "did not answer"),  # noqa: UP041  (asyncssh raises it)
        (OSError(errno.EHOSTUNREACH, "No route to host"), Verdict.UNREACHABLE, "No route to host"),
        (asyncssh.ConnectionLost("Connection lost"), Verdict.UNREACHABLE, "closed before login"),
        (asyncssh.PermissionDenied("Permission denied"), Verdict.AUTH_FAILED, "refused every key"),
        (asyncssh.ChannelOpenError(2, "Connection refused"), Verdict.UNREACHABLE, "jump host could not open"),
        (asyncssh.HostKeyNotVerifiable("Host key is revoked"), Verdict.HOST_KEY_CHANGED, "revoked"),
        (asyncssh.HostKeyNotVerifiable("Host key is not trusted"), Verdict.HOST_KEY_UNKNOWN, "not trusted"),
        (asyncssh.ProtocolError("bad packet"), Verdict.UNREACHABLE, "bad packet"),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else None,
)
def test_connection_errors_become_verdicts_a_person_can_act_on(exc: BaseException, verdict: Verdict, says: str) -> None:
    got, message, fix = judge(exc)
    assert got is verdict and got in CONNECTION_VERDICTS
    assert says in message
    assert fix, "every connection failure names something to do"


def test_a_failure_behind_a_jump_host_says_so() -> None:
    _, message, _ = judge(ConnectionRefusedError(errno.ECONNREFUSED, "refused"), via="bastion")
    assert "10.0.0.5:2222 (through the jump host bastion)" in message


def test_an_unknown_key_message_names_the_file_and_the_way_to_accept_it(tmp_path: Path) -> None:
    check = HostKeyCheck(resolved(), "yes", (), str(tmp_path / "kh"))
    check.outcome = "unknown"
    j = judge_connect_error(
        asyncssh.HostKeyNotVerifiable("x"),
        destination="build-1",
        address="10.0.0.5",
        port=2222,
        connect_timeout_s=1,
        key_check=check,
    )
    assert j.verdict is Verdict.HOST_KEY_UNKNOWN
    assert "[10.0.0.5]:2222" in j.message
    assert j.fix is not None and str(tmp_path / "kh") in j.fix and "accept-new" in j.fix


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.anyio
@pytest.mark.process
async def test_probe_hosts_keeps_input_order_and_reports_each_as_it_ends(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text("")  # nothing of the machine's own ssh config
    hosts = [Host(name=f"h{i}", address="127.0.0.1", port=closed_port()) for i in range(5)]
    seen: list[str] = []
    results = await probe_hosts(
        hosts,
        "agent",
        "",
        ProbeSettings(ssh_config=str(config)),
        concurrency=2,
        on_done=lambda r: seen.append(r.host.name),
    )
    assert [r.host for r in results] == hosts
    assert sorted(seen) == [h.name for h in hosts]
    assert all(r.verdict is Verdict.UNREACHABLE and "refused" in r.message for r in results)


@pytest.mark.anyio
@pytest.mark.process
async def test_a_config_ssh_cannot_read_is_a_verdict_not_an_exception(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text("Frobnicate yes\n")
    [result] = await probe_hosts([Host(name="h1")], "agent", "", ProbeSettings(ssh_config=str(config)))
    assert result.verdict is Verdict.UNREACHABLE
    assert "ssh could not resolve 'h1' from its config" in result.message and "frobnicate" in result.message


@pytest.mark.anyio
async def test_a_concurrency_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="concurrency"):
        await probe_hosts([], "agent", "", concurrency=0)


ASYNCSSH_CIPHERS = [alg.decode() for alg in asyncssh.encryption.get_encryption_algs()]


@pytest.mark.parametrize(
    ("allowed", "offered"),
    [
        # OpenSSH's defaults: AES-GCM moves first, the rest keep ssh's order.
        (
            ["chacha20-poly1305@openssh.com", "aes128-ctr", "aes128-gcm@openssh.com", "aes256-gcm@openssh.com"],
            ["aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com", "aes128-ctr"],
        ),
        (["aes256-ctr", "aes128-ctr"], ["aes256-ctr", "aes128-ctr"]),  # the user's choice stands
        (["aes128-ctr", "made-up@example.com"], ["aes128-ctr"]),  # what the client lacks is left out
        (["made-up@example.com"], []),  # nothing left: the client's defaults
        ([], []),
    ],
)
def test_a_probe_offers_the_users_ciphers_aes_gcm_first(allowed: list[str], offered: list[str]) -> None:
    assert probe_ciphers(allowed, ASYNCSSH_CIPHERS) == offered
