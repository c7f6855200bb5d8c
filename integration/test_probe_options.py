"""Every shape of ssh option an inventory may carry, through the real asyncssh probe to real sshd.

The target is a host only the namespaced lab host can reach (an sshd on the namespace's own
loopback), so a probe that comes back ``ready`` proves the jump or proxy was used. ProxyCommand
runs as ssh runs it (``%h %p %r %n %%`` expanded, by the user's shell); the ``nc`` it names here
is a small relay of the test's own (the machine may have none) that notes the words it was given.
ProxyJump is taken as ``user@host:port``, ``ssh://user@host:port``, an alias and a chain of two.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import anyio
import pytest

from hostinv import Host
from hostinv.probes import ProbeSettings, Verdict, probe_host

if TYPE_CHECKING:
    from pathlib import Path

    from integration.sshlab import SshHost, SshLab

pytestmark = pytest.mark.anyio

BOUND_S = 60
RELAY = f"""#!{sys.executable}
import json, os, socket, sys, threading
with open(os.environ["RA_RELAY_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
conn = socket.create_connection((sys.argv[1], int(sys.argv[2])))
def up():
    while data := os.read(0, 65536):
        conn.sendall(data)
    conn.shutdown(socket.SHUT_WR)
threading.Thread(target=up, daemon=True).start()
while data := conn.recv(65536):
    os.write(1, data)
"""


@pytest.fixture(scope="module")
def hidden(ssh_lab: SshLab) -> SshHost:
    """A host only the namespaced host can reach; started once per module."""
    return ssh_lab.start_hidden("hidden-opts")


def world(lab: SshLab, hidden: SshHost, root: Path) -> Path:
    """An ssh_config naming the hidden host (``hidden``: no jump of its own) with every lab key known."""
    known_hosts = root / "known_hosts"
    known_hosts.write_text("".join(f"{h.known_hosts_line}\n" for h in [*lab.hosts, hidden]))
    config = lab.config_variant(root / "ssh_config", known_hosts=known_hosts)
    config.write_text(
        f"Host hidden\n  HostName {hidden.address}\n  Port {hidden.port}\n\n"
        + config.read_text()
        + f"\nHost *\n  User root\n  IdentityFile {lab.client_key}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {known_hosts}\n  GlobalKnownHostsFile /dev/null\n"
    )
    return config


async def probe(config: Path, host: Host) -> tuple[Verdict, str]:
    settings = ProbeSettings(ssh_config=str(config), connect_timeout_s=20, command_timeout_s=30)
    with anyio.fail_after(BOUND_S):
        result = await probe_host(host, "sh", "", settings)
    return result.verdict, result.message


async def test_the_hidden_host_is_out_of_reach_without_a_jump(ssh_lab: SshLab, hidden: SshHost, tmp_path: Path) -> None:
    settings = ProbeSettings(ssh_config=str(world(ssh_lab, hidden, tmp_path)), connect_timeout_s=3)
    with anyio.fail_after(BOUND_S):
        result = await probe_host(Host(name="hidden"), "sh", "", settings)
    assert result.verdict is Verdict.UNREACHABLE, result.message


@pytest.mark.parametrize(
    "jump",
    ["root@{ns}:2222", "ssh://root@{ns}:2222", "lab4", "root@lab4", "lab1,root@{ns}:2222"],
    ids=["user@host:port", "ssh-url", "alias", "user@alias", "two-hops"],
)
async def test_proxy_jump_from_the_inventory(ssh_lab: SshLab, hidden: SshHost, tmp_path: Path, jump: str) -> None:
    config = world(ssh_lab, hidden, tmp_path)
    host = Host(name="hidden", ssh_options={"ProxyJump": jump.format(ns=ssh_lab.namespaced.address)})
    verdict, message = await probe(config, host)
    assert verdict is Verdict.READY, message


async def test_proxy_command_tokens_are_expanded_and_run_by_the_shell(
    ssh_lab: SshLab, hidden: SshHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir, log = tmp_path / "bin", tmp_path / "relay.log"
    bin_dir.mkdir()
    (bin_dir / "nc").write_text(RELAY)
    (bin_dir / "nc").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin")
    monkeypatch.setenv("RA_RELAY_LOG", str(log))
    config = world(ssh_lab, hidden, tmp_path)
    namespace = ssh_lab.namespaced.namespace
    command = f"ip netns exec {namespace} nc %h %p %r %n 100%%"
    verdict, message = await probe(config, Host(name="hidden", ssh_options={"ProxyCommand": command}))
    assert verdict is Verdict.READY, message
    said = [json.loads(line) for line in log.read_text().splitlines()]
    assert said == [[hidden.address, str(hidden.port), "root", "hidden", "100%"]]


@pytest.mark.parametrize(
    ("command", "cause", "says"),
    [
        ("exit 1", "connect_failed", "through the ProxyCommand 'exit 1'"),
        ("nc %h %q", "ssh_config_invalid", "unknown token %q"),
    ],
)
async def test_a_proxy_command_that_fails_is_a_verdict(
    ssh_lab: SshLab, hidden: SshHost, tmp_path: Path, command: str, cause: str, says: str
) -> None:
    settings = ProbeSettings(ssh_config=str(world(ssh_lab, hidden, tmp_path)), connect_timeout_s=10)
    with anyio.fail_after(BOUND_S):
        result = await probe_host(Host(name="hidden", ssh_options={"ProxyCommand": command}), "sh", "", settings)
    assert result.verdict is Verdict.UNREACHABLE, result.message
    assert result.cause is not None and result.cause.value == cause, result.message
    assert says in result.message


@pytest.mark.parametrize(
    "options",
    [
        {"HostName": "{address}", "Port": "{port}"},
        {"HostName": "{address}", "Port": "{port}", "User": "root", "IdentitiesOnly": "yes"},
        {"HostName": "{address}", "Port": "{port}", "Ciphers": "aes256-ctr,aes128-ctr"},
        {"HostName": "{address}", "Port": "{port}", "SendEnv": "LC_*", "ServerAliveInterval": "5"},
        {"HostName": "{address}", "Port": "{port}", "HostKeyAlias": "lab1-alias"},
    ],
    ids=["address", "user-and-identity", "ciphers", "session-only-options", "host-key-alias"],
)
async def test_other_options_from_the_inventory(
    ssh_lab: SshLab, hidden: SshHost, tmp_path: Path, options: dict[str, str]
) -> None:
    config = world(ssh_lab, hidden, tmp_path)
    lab1 = ssh_lab.host("lab1")
    known = tmp_path / "known_hosts"
    if "HostKeyAlias" in options:  # the key is known under the alias only
        alias_line = "lab1-alias " + lab1.known_hosts_line.split(" ", 1)[1]
        known.write_text(known.read_text().replace(lab1.known_hosts_line, alias_line))
    before = known.read_text()
    filled = {k: v.format(address=lab1.address, port=lab1.port) for k, v in options.items()}
    verdict, message = await probe(config, Host(name="somewhere", ssh_options=filled))
    assert verdict is Verdict.READY, message
    assert known.read_text() == before  # the key was found where ssh looks for it
