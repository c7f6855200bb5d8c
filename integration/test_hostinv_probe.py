"""Probes over asyncssh against real sshd hosts: one run over hosts that are ready, down, re-keyed,
behind a jump host, or have the agent only on the login PATH; host key policies; and a key added
under accept-new that the real ``ssh`` then knows.

The hosts are the session's lab (:mod:`integration.sshlab`) plus one reachable only through the
namespaced host. Every run reads a known_hosts file and an ssh_config of the test's own, so the
lab's files are never changed. The agent is a small script printing a version; the users are
throwaway ones whose dotfiles put it on the session's PATH (``~/.bashrc``, read by bash for
ssh commands) or only on the login PATH (``~/.profile``).
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import pytest

from hostinv import Host
from hostinv.probes import HostProbe, ProbeSettings, Verdict, probe_host, probe_hosts
from integration.sshlab import SshLab, free_port
from integration.users import SHELLS, User, throwaway_user

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.anyio

AGENT = "fake-agent"
AGENT_SCRIPT = '#!/bin/sh\n[ "$1" = --version ] && echo "fake-agent 1.2.3"\n'
WORKSPACE = "work"


@pytest.fixture(scope="module")
def session_user(ssh_lab: SshLab, homes: Path) -> Iterator[User]:
    """The agent on the PATH a session gets: ~/.bashrc, which bash reads for an ssh command."""
    dotfiles = {".bashrc": 'PATH="$HOME/bin:$PATH"; export PATH\n'}
    with throwaway_user(
        ssh_lab.client_key.with_suffix(".pub"), shell=SHELLS["bash"], base=homes, dotfiles=dotfiles
    ) as u:
        u.write(f"bin/{AGENT}", AGENT_SCRIPT, mode=0o755)
        u.makedirs(u.home / WORKSPACE)
        yield u


@pytest.fixture(scope="module")
def login_user(ssh_lab: SshLab, homes: Path) -> Iterator[User]:
    """The agent only on the login PATH: ~/.profile, which only a login shell reads."""
    dotfiles = {".profile": 'PATH="$HOME/tools:$PATH"; export PATH\n'}
    with throwaway_user(
        ssh_lab.client_key.with_suffix(".pub"), shell=SHELLS["bash"], base=homes, dotfiles=dotfiles
    ) as u:
        u.write(f"tools/{AGENT}", AGENT_SCRIPT, mode=0o755)
        u.makedirs(u.home / WORKSPACE)
        yield u


@pytest.fixture(scope="module")
def hidden(ssh_lab: SshLab) -> str:
    """A host only the namespaced host can reach (its alias); started once per module."""
    return ssh_lab.start_hidden("hidden").alias


def lab_files(lab: SshLab, root: Path, *, known: list[str], hidden: str | None = None) -> tuple[Path, Path]:
    """An ssh_config like the lab's (plus the hidden host's block) reading ``root/known_hosts``,
    which holds the lines ``known``."""
    known_hosts = root / "known_hosts"
    known_hosts.write_text("".join(f"{line}\n" for line in known))
    config = lab.config_variant(root / "ssh_config", known_hosts=known_hosts)
    if hidden is not None:
        block = lab.hidden_config_block(next(h for h in lab.hidden if h.alias == hidden))
        config.write_text(config.read_text() + "\n" + block.replace(str(lab.known_hosts), str(known_hosts)))
    return config, known_hosts


def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """A short local command (ssh-keygen, a one-line ssh), waited for in the test's thread."""
    return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False)


def by_name(results: list[HostProbe]) -> dict[str, HostProbe]:
    return {r.host.name: r for r in results}


async def test_one_run_over_many_hosts_gives_each_its_verdict(
    ssh_lab: SshLab, session_user: User, login_user: User, hidden: str, tmp_path: Path
) -> None:
    lab2 = ssh_lab.host("lab2")
    hidden_host = next(h for h in ssh_lab.hidden if h.alias == hidden)
    known = [h.known_hosts_line for h in ssh_lab.hosts if h.alias != "lab2"]
    known += [SshLab.other_key_line(lab2, tmp_path), hidden_host.known_hosts_line]
    config, known_hosts = lab_files(ssh_lab, tmp_path, known=known, hidden=hidden)
    down_port = free_port("127.0.0.1")
    hosts = [
        Host(name="ready", address="lab1", user=session_user.name),
        Host(name="down", address="127.0.0.1", port=down_port),
        Host(name="changed", address="lab2", user=session_user.name),
        Host(name="login-only", address="lab3", user=login_user.name),
        Host(name="behind-jump", address=hidden, user=session_user.name),
        # the hidden host's address without the jump: nothing there, so the jump above was used
        Host(name="hidden-direct", address=hidden_host.address, port=hidden_host.port, user=session_user.name),
    ]
    done: list[str] = []
    settings = ProbeSettings(ssh_config=str(config), connect_timeout_s=15, command_timeout_s=30)
    results = await probe_hosts(
        hosts, AGENT, WORKSPACE, settings, concurrency=8, on_done=lambda r: done.append(r.host.name)
    )

    assert [r.host.name for r in results] == [h.name for h in hosts]
    assert sorted(done) == sorted(h.name for h in hosts)
    got = by_name(results)
    summary = {name: (r.verdict, r.message) for name, r in got.items()}

    ready = got["ready"]
    assert ready.verdict is Verdict.READY, summary
    assert ready.report is not None and ready.report.agent_version == "fake-agent 1.2.3"
    assert ready.report.agent_path == f"{session_user.home}/bin/{AGENT}"
    assert "fake-agent 1.2.3" in ready.message
    assert ready.fix is None and ready.latency_s > 0

    down = got["down"]
    assert down.verdict is Verdict.UNREACHABLE, summary
    assert f"127.0.0.1:{down_port} refused the connection" in down.message
    assert down.fix and "sshd" in down.fix and down.report is None

    changed = got["changed"]
    assert changed.verdict is Verdict.HOST_KEY_CHANGED, summary
    name = f"[{lab2.address}]:{lab2.port}"
    assert changed.fix is not None and f"ssh-keygen -f {known_hosts} -R '{name}'" in changed.fix
    assert name in changed.message and str(known_hosts) in changed.message
    # the fix is exact: after it (and accepting the new key), the host is ready
    assert run(["ssh-keygen", "-f", str(known_hosts), "-R", name]).returncode == 0
    again = await probe_host(hosts[2], AGENT, WORKSPACE, settings)
    assert again.verdict is Verdict.READY, again.message

    login_only = got["login-only"]
    assert login_only.verdict is Verdict.AGENT_NOT_FOUND, summary
    tools = f"{login_user.home}/tools"
    assert login_only.fix is not None and f"add {tools} to PATH" in login_only.fix
    assert "interactive login shell finds it" in login_only.message

    behind = got["behind-jump"]
    assert behind.verdict is Verdict.READY, summary
    assert behind.report is not None and behind.report.agent_version == "fake-agent 1.2.3"

    direct = got["hidden-direct"]
    assert direct.verdict is Verdict.UNREACHABLE, summary


async def test_under_yes_an_unknown_key_is_refused_and_nothing_is_written(ssh_lab: SshLab, tmp_path: Path) -> None:
    config, known_hosts = lab_files(ssh_lab, tmp_path, known=[])
    settings = ProbeSettings(ssh_config=str(config), host_key_policy="yes", connect_timeout_s=15)
    result = await probe_host(Host(name="lab1"), AGENT, "", settings)
    assert result.verdict is Verdict.HOST_KEY_UNKNOWN, result.message
    lab1 = ssh_lab.host("lab1")
    assert f"[{lab1.address}]:{lab1.port}" in result.message
    assert result.fix is not None and "accept-new" in result.fix
    assert known_hosts.read_text() == ""


@pytest.mark.parametrize("hashed", [False, True], ids=["plain", "hashed"])
async def test_accept_new_writes_a_line_the_real_ssh_then_accepts(
    ssh_lab: SshLab, tmp_path: Path, hashed: bool
) -> None:
    config, known_hosts = lab_files(ssh_lab, tmp_path, known=[])
    lab3 = ssh_lab.host("lab3")
    options = {"HashKnownHosts": "yes"} if hashed else {}
    settings = ProbeSettings(ssh_config=str(config), connect_timeout_s=15, command_timeout_s=30)
    result = await probe_host(Host(name="lab3", ssh_options=options), "sh", "", settings)
    assert result.verdict is Verdict.READY, result.message

    lines = known_hosts.read_text().splitlines()
    assert len(lines) == 1
    name, key_type, key = lines[0].split(" ")
    assert [key_type, key] == lab3.known_hosts_line.split(" ")[1:]
    if hashed:
        assert name.startswith("|1|")
    else:
        assert name == f"[{lab3.address}]:{lab3.port}"
    # ssh finds it by name (hashed or not) ...
    found = run(["ssh-keygen", "-F", f"[{lab3.address}]:{lab3.port}", "-f", str(known_hosts)])
    assert found.returncode == 0 and key in found.stdout
    # ... and a strict ssh session sees the host as known
    done = run(
        ["ssh", "-F", str(config), "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "lab3", "echo", "known"]
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "known"
    # a second probe finds the key known and writes nothing more
    again = await probe_host(Host(name="lab3", ssh_options=options), "sh", "", settings)
    assert again.verdict is Verdict.READY and known_hosts.read_text().splitlines() == lines


async def test_a_key_sshd_does_not_accept_is_auth_failed_without_a_prompt(ssh_lab: SshLab, tmp_path: Path) -> None:
    stranger = tmp_path / "stranger_ed25519"
    assert run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)]).returncode == 0
    config, _ = lab_files(ssh_lab, tmp_path, known=[h.known_hosts_line for h in ssh_lab.hosts])
    config.write_text(config.read_text().replace(str(ssh_lab.client_key), str(stranger)))
    result = await probe_host(Host(name="lab1"), AGENT, "", ProbeSettings(ssh_config=str(config)))
    assert result.verdict is Verdict.AUTH_FAILED, result.message
    assert result.fix is not None and "authorized_keys" in result.fix


async def test_a_name_that_does_not_resolve_is_unreachable_and_says_so(ssh_lab: SshLab, tmp_path: Path) -> None:
    config, _ = lab_files(ssh_lab, tmp_path, known=[])
    result = await probe_host(Host(name="nowhere.invalid"), AGENT, "", ProbeSettings(ssh_config=str(config)))
    assert result.verdict is Verdict.UNREACHABLE, result.message
    assert "'nowhere.invalid' did not resolve" in result.message


async def test_keys_in_home_known_hosts_are_not_trusted_when_ssh_would_read_another_file(
    ssh_lab: SshLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # asyncssh falls back to $HOME/.ssh/known_hosts when given no file; ssh reads only its
    # UserKnownHostsFile, here one that does not exist yet, so the key is unknown.
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "known_hosts").write_text(ssh_lab.host("lab1").known_hosts_line + "\n")
    monkeypatch.setenv("HOME", str(home))
    config, known_hosts = lab_files(ssh_lab, tmp_path, known=[])
    known_hosts.unlink()
    settings = ProbeSettings(ssh_config=str(config), host_key_policy="yes", connect_timeout_s=15)
    result = await probe_host(Host(name="lab1"), AGENT, "", settings)
    assert result.verdict is Verdict.HOST_KEY_UNKNOWN, result.message
    assert not known_hosts.exists()


async def test_a_known_hosts_file_is_parsed_once_per_run_not_once_per_host(
    ssh_lab: SshLab, session_user: User, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # asyncssh would parse every key of the file at every connection: over a fleet listing
    # itself, the square of its size. The runner parses each version of the file once.
    import asyncssh

    parsed: list[object] = []
    real = asyncssh.read_known_hosts

    def counted(files: object) -> object:
        parsed.append(files)
        return real(files)  # type: ignore[arg-type]

    monkeypatch.setattr(asyncssh, "read_known_hosts", counted)
    monkeypatch.setattr(asyncssh.known_hosts, "read_known_hosts", counted)  # what connect uses on a file
    config, _ = lab_files(ssh_lab, tmp_path, known=[h.known_hosts_line for h in ssh_lab.hosts])
    hosts = [Host(name=h.alias, user=session_user.name) for h in ssh_lab.hosts]
    assert len(hosts) >= 3
    settings = ProbeSettings(ssh_config=str(config), connect_timeout_s=15, command_timeout_s=30)
    results = await probe_hosts(hosts, AGENT, WORKSPACE, settings, concurrency=8)
    assert [r.verdict for r in results] == [Verdict.READY] * len(hosts), [r.message for r in results]
    assert len(parsed) == 1


@pytest.mark.parametrize(
    ("ciphers", "negotiated"),
    [(None, "aes128-gcm@openssh.com"), ("aes256-ctr", "aes256-ctr")],
)
async def test_a_probe_connects_with_the_ciphers_the_users_ssh_allows(
    ssh_lab: SshLab, tmp_path: Path, ciphers: str | None, negotiated: str
) -> None:
    """AES-GCM first (cheaper for asyncssh than chacha20-poly1305) unless the user's config
    narrows the choice, which then holds."""
    from hostinv.probes.connect import connect
    from hostinv.probes.runner import _check, _resolve

    config, _ = lab_files(ssh_lab, tmp_path, known=[h.known_hosts_line for h in ssh_lab.hosts])
    if ciphers is not None:
        config.write_text(f"Host *\n  Ciphers {ciphers}\n" + config.read_text())
    settings = ProbeSettings(ssh_config=str(config), connect_timeout_s=30)
    resolved = await _resolve("lab1", settings)
    async with await connect(resolved, _check(resolved, settings), timeout_s=30) as conn:
        assert (conn.get_extra_info("send_cipher"), conn.get_extra_info("recv_cipher")) == (negotiated, negotiated)
