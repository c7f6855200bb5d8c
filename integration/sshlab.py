"""A lab of real OpenSSH servers for the integration tests.

Each host is an ``sshd`` listening on its own loopback address (127.0.0.2 and up) and a high
port, with a generated host key. The lab owns a client key, a ``known_hosts`` file and an
``ssh_config`` with one alias per host, so no test reads or writes the real ``~/.ssh``. One host
can live in a network namespace of its own behind a veth pair, so a test can cut its link.

The servers notice a vanished client quickly (``ClientAliveInterval 1``), accept the suite's
orphan marker (``AcceptEnv``) and the client config sends it (``SendEnv``), so processes started
on the "remote" side carry the marker of the test that started them and the suite's orphan
check sees them too.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from remote_acp.targets.process import tree as process_tree
from tests.support.orphans import MARKER_NAME

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["SshHost", "SshLab", "ensure_openssh_server"]

SSHD = "/usr/sbin/sshd"


def ensure_openssh_server() -> None:
    """Install Debian's openssh-server when sshd is missing (the test command runs as root)."""
    if not os.path.exists(SSHD):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, capture_output=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", "openssh-server"], check=True, env=env, capture_output=True)
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)


def free_port(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return int(s.getsockname()[1])


def keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


def wait_listening(address: str, port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((address, port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


@dataclass
class SshHost:
    alias: str
    address: str
    port: int
    root: Path
    namespace: str | None = None
    veth: str | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def host_key(self) -> Path:
        return self.root / "host_ed25519"

    @property
    def known_hosts_line(self) -> str:
        key = " ".join(self.host_key.with_suffix(".pub").read_text().split()[:2])
        return f"[{self.address}]:{self.port} {key}"

    def session_processes(self) -> list[int]:
        """The per-connection sshd processes (and what they run) under this listener."""
        if self.process is None:
            return []
        return [ref.pid for ref in process_tree.descendants(self.process.pid)]

    def cut_link(self) -> None:
        assert self.veth is not None, "only a namespaced host has a link to cut"
        subprocess.run(["ip", "link", "set", self.veth, "down"], check=True)

    def restore_link(self) -> None:
        assert self.veth is not None
        subprocess.run(["ip", "link", "set", self.veth, "up"], check=True)


class SshLab:
    """Start ``count`` loopback hosts (and optionally one namespaced host); stop them all."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.hosts: list[SshHost] = []
        self.client_key = root / "client_ed25519"
        self.known_hosts = root / "known_hosts"
        self.config = root / "ssh_config"
        self.authorized_keys = root / "authorized_keys"
        self._namespaces: list[str] = []
        self._links: list[str] = []
        self.hidden: list[SshHost] = []
        self.max_startups = "200:30:300"

    def start(self, count: int = 3, *, namespaced: bool = True, max_startups: str = "200:30:300") -> SshLab:
        """``max_startups``: sshd's ``MaxStartups`` (the default is roomy, so parallel tests never
        meet it; a test of the limit sets a small one)."""
        self.max_startups = max_startups
        ensure_openssh_server()
        keygen(self.client_key)
        shutil.copy(self.client_key.with_suffix(".pub"), self.authorized_keys)
        for index in range(count):
            address = f"127.0.0.{index + 2}"
            self.hosts.append(self._host(f"lab{index + 1}", address, free_port(address)))
        if namespaced:
            self.hosts.append(self._namespaced_host(f"lab{count + 1}"))
        for host in self.hosts:
            self._start_sshd(host)
        self.write_known_hosts(self.hosts)
        self._write_config()
        return self

    def host(self, alias: str) -> SshHost:
        return next(h for h in self.hosts if h.alias == alias)

    @property
    def namespaced(self) -> SshHost:
        return next(h for h in self.hosts if h.namespace is not None)

    def _host(self, alias: str, address: str, port: int, namespace: str | None = None) -> SshHost:
        host = SshHost(alias, address, port, self.root / alias, namespace)
        host.root.mkdir()
        keygen(host.host_key)
        (host.root / "sshd_config").write_text(
            "\n".join(
                [
                    f"ListenAddress {address}",
                    f"Port {port}",
                    f"HostKey {host.host_key}",
                    f"PidFile {host.root / 'sshd.pid'}",
                    # The lab's key for root, and each throwaway user's own file (integration.users).
                    f"AuthorizedKeysFile {self.authorized_keys} .ssh/authorized_keys",
                    "PubkeyAuthentication yes",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "UsePAM no",
                    "PermitRootLogin prohibit-password",
                    "StrictModes no",
                    "LogLevel VERBOSE",
                    f"AcceptEnv {MARKER_NAME}",
                    # Notice a vanished client within ~3 s, so a cut link ends the remote side.
                    "ClientAliveInterval 1",
                    "ClientAliveCountMax 2",
                    f"MaxStartups {self.max_startups}",
                    "",
                ]
            )
        )
        return host

    def _namespaced_host(self, alias: str) -> SshHost:
        # Labs of parallel test processes each take a namespace and a subnet no other lab holds:
        # chosen and created under one lock, so two labs starting at once never pick the same.
        with open("/tmp/remote-acp-sshlab.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            return self._namespaced_host_locked(alias)

    def _namespaced_host_locked(self, alias: str) -> SshHost:
        taken = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True, check=True).stdout
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
        for step in range(200):
            subnet = 10 + (os.getpid() + step) % 200
            tag = f"{(os.getpid() + step) % 10000}"
            if f"10.231.{subnet}." not in taken and f"ralab{tag}" not in names.split():
                break
        else:
            raise RuntimeError("no free subnet for the namespaced lab host")
        namespace, veth, peer = f"ralab{tag}", f"ralab{tag}h", f"ralab{tag}n"
        host_ip, ns_ip = f"10.231.{subnet}.1", f"10.231.{subnet}.2"
        for cmd in (
            ["ip", "netns", "add", namespace],
            ["ip", "link", "add", veth, "type", "veth", "peer", "name", peer],
            ["ip", "link", "set", peer, "netns", namespace],
            ["ip", "addr", "add", f"{host_ip}/30", "dev", veth],
            ["ip", "link", "set", veth, "up"],
            ["ip", "-n", namespace, "addr", "add", f"{ns_ip}/30", "dev", peer],
            ["ip", "-n", namespace, "link", "set", peer, "up"],
            ["ip", "-n", namespace, "link", "set", "lo", "up"],
        ):
            subprocess.run(cmd, check=True, capture_output=True)
            if cmd[:3] == ["ip", "netns", "add"]:
                self._namespaces.append(namespace)
            elif cmd[:3] == ["ip", "link", "add"]:
                self._links.append(veth)
        host = self._host(alias, ns_ip, 2222, namespace)
        host.veth = veth
        return host

    def _start_sshd(self, host: SshHost) -> None:
        # The listener must not carry a test's orphan marker: it outlives every test.
        env = {k: v for k, v in os.environ.items() if k != MARKER_NAME}
        argv = [SSHD, "-D", "-e", "-f", str(host.root / "sshd_config")]
        if host.namespace:
            argv = ["ip", "netns", "exec", host.namespace, *argv]
        log = open(host.root / "sshd.log", "wb")
        host.process = subprocess.Popen(argv, stdout=log, stderr=log, env=env, start_new_session=True)
        log.close()
        if host.namespace:
            deadline = time.monotonic() + 10
            while not (host.root / "sshd.pid").exists():
                if time.monotonic() > deadline or host.process.poll() is not None:
                    raise RuntimeError(f"sshd for {host.alias} did not start: {(host.root / 'sshd.log').read_text()}")
                time.sleep(0.01)
        else:
            wait_listening(host.address, host.port)

    def write_known_hosts(self, hosts: list[SshHost]) -> None:
        self.known_hosts.write_text("".join(f"{h.known_hosts_line}\n" for h in hosts))

    def _write_config(self) -> None:
        blocks = [f"Host {h.alias}\n  HostName {h.address}\n  Port {h.port}\n" for h in self.hosts]
        blocks.append(
            "Host lab*\n"
            "  User root\n"
            f"  IdentityFile {self.client_key}\n"
            "  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {self.known_hosts}\n"
            "  GlobalKnownHostsFile /dev/null\n"
            f"  SendEnv {MARKER_NAME}\n"
        )
        self.config.write_text("\n".join(blocks))

    def config_variant(self, path: Path, *, known_hosts: Path | None = None, identity: Path | None = None) -> Path:
        """A copy of the lab's ssh_config with another known_hosts file or client key."""
        text = self.config.read_text()
        if known_hosts is not None:
            text = text.replace(str(self.known_hosts), str(known_hosts))
        if identity is not None:
            text = text.replace(str(self.client_key), str(identity))
        path.write_text(text)
        return path

    def start_hidden(self, alias: str) -> SshHost:
        """One more host, reachable only through the namespaced host: an sshd on the namespace's
        own loopback (``127.0.0.1`` there), which nothing outside the namespace can reach, so a
        connection to it proves that the namespaced host was the jump host. Not in ``hosts``, the
        lab's ssh_config or its known_hosts (see :meth:`hidden_config_block`); stopped by
        :meth:`stop`."""
        behind = self.namespaced
        port = free_port("127.0.0.1")  # free here; the namespace's loopback is empty anyway
        host = self._host(alias, "127.0.0.1", port, behind.namespace)
        self.hidden.append(host)
        self._start_sshd(host)
        return host

    def hidden_config_block(self, host: SshHost) -> str:
        """An ssh_config block that reaches a :meth:`start_hidden` host through the namespaced host."""
        return (
            f"Host {host.alias}\n  HostName {host.address}\n  Port {host.port}\n"
            f"  ProxyJump {self.namespaced.alias}\n  User root\n  IdentityFile {self.client_key}\n"
            f"  IdentitiesOnly yes\n  UserKnownHostsFile {self.known_hosts}\n  GlobalKnownHostsFile /dev/null\n"
        )

    @staticmethod
    def other_key_line(host: SshHost, root: Path) -> str:
        """A known_hosts line for ``host`` with a key it does not have (a "changed" key)."""
        other = root / f"other_{host.alias}_ed25519"
        if not other.exists():
            keygen(other)
        key = " ".join(other.with_suffix(".pub").read_text().split()[:2])
        return f"[{host.address}]:{host.port} {key}"

    def stop(self) -> None:
        for host in [*self.hosts, *self.hidden]:
            if host.process is None:
                continue
            tree = process_tree.descendants(host.process.pid)
            try:
                os.killpg(host.process.pid, signal.SIGKILL)
            except OSError:
                pass
            process_tree.signal_refs(tree, signal.SIGKILL)
            host.process.wait()
        for link in self._links:
            subprocess.run(["ip", "link", "del", link], capture_output=True, check=False)
        for namespace in self._namespaces:
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, check=False)
