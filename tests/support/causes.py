"""Helpers for provoking failure causes for real: a server that stalls ssh's key exchange, the
``remote-acp`` command run as a process with its JSON read back, and the ssh_configs that make
a lab host fail in a chosen way."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

__all__ = ["CLI", "CliRun", "StallingServer", "free_port", "keygen", "remote_acp", "wrong_key_line"]

CLI = [sys.executable, "-m", "remote_acp.cli.main"]


class StallingServer:
    """Accepts connections, sends an SSH banner, then says nothing more (a key exchange that never
    completes). A thread of the test process: nothing to reap."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.connections: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            conn.sendall(b"SSH-2.0-OpenSSH_9.2p1 stalling\r\n")
            self.connections.append(conn)

    def close(self) -> None:
        # Closing a listening socket does not wake a thread blocked in accept(); shutting it down
        # does (accept() fails at once), so the thread ends now rather than at join's timeout.
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        self.thread.join(5)
        for conn in self.connections:
            conn.close()


def free_port(address: str) -> int:
    """A port nothing listens on at ``address`` (bound for a moment, then released)."""
    with socket.socket() as s:
        s.bind((address, 0))
        return int(s.getsockname()[1])


def keygen(path: Path) -> Path:
    """A fresh ed25519 key pair at ``path`` (no passphrase); ``path`` again."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


def wrong_key_line(name: str, root: Path) -> str:
    """A known_hosts line for ``name`` (``[address]:port``) with a key that host does not have."""
    other = root / "other_host_key"
    if not other.exists():
        keygen(other)
    key = " ".join(other.with_suffix(".pub").read_text().split()[:2])
    return f"{name} {key}"


@dataclass(frozen=True)
class CliRun:
    """A finished ``remote-acp`` run: its exit status and its JSON lines."""

    status: int
    lines: list[dict[str, Any]]
    stderr: str

    def last(self, kind: str) -> dict[str, Any]:
        """The last JSON line of ``type`` ``kind``."""
        found = [line for line in self.lines if line.get("type") == kind]
        assert found, f"no {kind} line in {self.lines}; stderr: {self.stderr}"
        return found[-1]


async def remote_acp(args: Sequence[str], env: Mapping[str, str], *, within: float = 60) -> CliRun:
    """Run ``remote-acp ARGS`` (which must ask for ``--json``) as a process, bounded."""
    with anyio.fail_after(within):
        done = await anyio.run_process([*CLI, *args], env={**os.environ, **env}, check=False)
    text = done.stdout.decode()
    return CliRun(done.returncode, [json.loads(line) for line in text.splitlines() if line], done.stderr.decode())
