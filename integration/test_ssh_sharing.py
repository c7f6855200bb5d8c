"""No connection sharing: a user's ControlMaster is neither used nor harmed by our sessions.

The user's ssh_config asks for sharing (``ControlMaster auto``, a ``ControlPath``,
``ControlPersist``) and a master is running for the host. Sessions must open connections of
their own (a mux client hands its pipes to the master, whose death at our teardown would end
every session riding on it), and ending one must leave the master and the other session alive.
Which connection a process rides on is read from ``SSH_CONNECTION`` on the host: its client port
is the connection's own, so two commands run through one master report the same port.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from remote_acp import SessionOptions, open_session
from remote_acp.targets.ssh.settings import SshSettings
from remote_acp.targets.ssh.target import SshTarget
from tests.support.agents import fast_options, scripted
from tests.support.orphans import alive

if TYPE_CHECKING:
    from collections.abc import Iterator

    from integration.sshlab import SshLab

pytestmark = pytest.mark.anyio

HOST = "lab2"
SSH_BOUNDS = {"read_timeout_ms": 5_000, "initialize_floor_ms": 15_000, "stop_grace_ms": 1_000}


def options(*args: str) -> SessionOptions:
    return fast_options(scripted(*args), **SSH_BOUNDS)


def ssh(config: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ssh", "-F", str(config), *args], capture_output=True, text=True, timeout=30, check=check)


def master_pid(config: Path) -> int | None:
    done = ssh(config, "-O", "check", HOST, check=False)
    if done.returncode != 0:
        return None
    # "Master running (pid=1234)"
    return int(done.stderr.split("pid=")[1].split(")")[0])


@pytest.fixture
def sharing_config(ssh_lab: SshLab, tmp_path: Path) -> Iterator[Path]:
    """The lab's ssh_config with connection sharing on for HOST, and a master running for it
    (started here, with ``ssh -MNf``, as a user's earlier command would have)."""
    # A socket path must fit in sun_path (108 bytes): a short directory, not the test's own.
    sockets = Path(tempfile.mkdtemp(prefix="ra-cm-"))
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host {HOST}\n  ControlMaster auto\n  ControlPath {sockets}/%C\n  ControlPersist 600\n\n"
        + ssh_lab.config.read_text()
    )
    with (tmp_path / "master.log").open("wb") as log:
        # -f: the master goes to the background once authenticated; its output goes to a file so
        # that nothing waits for it to close a pipe.
        subprocess.run(
            ["ssh", "-F", str(config), "-MNf", HOST],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, timeout=30, check=True,
        )  # fmt: skip
    try:
        yield config
    finally:
        pid = master_pid(config)
        ssh(config, "-O", "exit", HOST, check=False)
        deadline = time.monotonic() + 10
        while pid is not None and alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        shutil.rmtree(sockets, ignore_errors=True)


def client_port(ssh_connection: str) -> str:
    """The client port of an ``SSH_CONNECTION`` value (client address, client port, server...)."""
    return ssh_connection.split()[1]


async def test_sessions_never_ride_on_or_kill_the_users_master(sharing_config: Path, tmp_path: Path) -> None:
    master = master_pid(sharing_config)
    assert master is not None and alive(master)
    # Through the master, every command shares its connection: the same client port each time.
    through_master = {client_port(ssh(sharing_config, HOST, "echo $SSH_CONNECTION").stdout) for _ in range(2)}
    assert len(through_master) == 1

    target = SshTarget(HOST, SshSettings(config_file=str(sharing_config)))
    dumps = [tmp_path / "first.json", tmp_path / "second.json"]
    async with open_session("/tmp", options("--env-dump", str(dumps[1])), target=target) as second:
        async with open_session("/tmp", options("--env-dump", str(dumps[0])), target=target) as first:
            assert (await first.run_turn("one")).ok
            assert (await second.run_turn("two")).ok
        # The first session is torn down: the master (which we did not start) and the second
        # session live on.
        assert master_pid(sharing_config) == master and alive(master)
        assert (await second.run_turn("still here")).last_message == "still here"
    assert master_pid(sharing_config) == master and alive(master)
    ports = [client_port(json.loads(dump.read_text())["SSH_CONNECTION"]) for dump in dumps]
    assert len(set(ports)) == 2, "the two sessions shared a connection"
    assert not set(ports) & through_master, "a session rode on the user's master"
    # And the master still serves its own user.
    assert client_port(ssh(sharing_config, HOST, "echo $SSH_CONNECTION").stdout) in through_master
