"""Agent slots live where no other local user can make or fill their directory first: the user's
runtime directory when the host keeps one, else a directory per host name in the user's home.
The session script (which takes a slot) and the probe (which counts them) find the same one.

The scripts run here under ``/bin/sh`` as a host runs them, with HOME and XDG_RUNTIME_DIR of the
test's own."""

from __future__ import annotations

import os
import socket
import subprocess
from typing import TYPE_CHECKING

import pytest

from hostinv.probes import parse_report, probe_script
from hostinv.slots import PRIVATE
from remote_acp.targets.ssh.loader import BOOTSTRAP, stdin_prefix
from remote_acp.targets.ssh.script import remote_script

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

TIMEOUT_S = 30
OTHER_UID = 65534


class Session:
    """A session script holding a slot (its agent: sleep) until the test ends it."""

    def __init__(self, env: dict[str, str]) -> None:
        script = remote_script("/", ["sleep", "60"], capacity=1, slot_prefix=PRIVATE, ready_marker="rdy")
        self.proc = subprocess.Popen(
            ["/bin/sh", "-c", BOOTSTRAP],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(stdin_prefix(script))
        self.proc.stdin.flush()
        self.started = self.proc.stdout.readline() == b"rdy\n"
        if self.started:
            self.proc.stdin.write(b"go\n")
            self.proc.stdin.flush()

    def end(self) -> tuple[int, bytes]:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
        _, err = self.proc.communicate(timeout=TIMEOUT_S)
        return self.proc.returncode, err


@pytest.fixture
def sessions() -> Iterator[list[Session]]:
    started: list[Session] = []
    yield started
    for session in started:
        session.end()


def held(env: dict[str, str]) -> tuple[int | None, str | None]:
    """The probe's count of slots held, and the slot directory it names when it is unusable."""
    script = probe_script("sh", "/", slot_prefix=PRIVATE)
    done = subprocess.run(["/bin/sh", "-s"], input=script.encode(), capture_output=True, env=env, timeout=TIMEOUT_S)
    report = parse_report(done.stdout.decode())
    return report.slots_held, report.slot_dir


def environment(home: Path, runtime: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"} | {"HOME": str(home)}
    return env | ({"XDG_RUNTIME_DIR": str(runtime)} if runtime is not None else {})


def test_the_runtime_directory_holds_the_slots_when_the_host_keeps_one(tmp_path: Path, sessions: list[Session]) -> None:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = environment(tmp_path / "home", runtime)
    sessions.append(Session(env))
    assert sessions[0].started
    assert (runtime / "remote-acp-slots" / "slot-1").exists()
    assert held(env) == (1, None)
    second = Session(env)  # capacity 1: refused, the slot is held
    sessions.append(second)
    assert not second.started and second.end()[0] != 0


def test_without_one_the_slots_are_in_the_home_per_host_name(tmp_path: Path, sessions: list[Session]) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = environment(home, None) | {"XDG_RUNTIME_DIR": "relative/is/ignored"}
    sessions.append(Session(env))
    assert sessions[0].started
    where = home / ".cache" / "remote-acp-slots" / socket.gethostname()
    uid = os.geteuid()
    if os.path.isdir(f"/run/user/{uid}"):  # this machine keeps a runtime directory: that wins
        where = __import__("pathlib").Path(f"/run/user/{uid}/remote-acp-slots")
    assert (where / "slot-1").exists()
    assert oct(where.stat().st_mode & 0o777) == "0o700"
    assert held(env) == (1, None)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a directory another user's needs root")
def test_a_runtime_directory_someone_else_owns_is_passed_over(tmp_path: Path, sessions: list[Session]) -> None:
    squatted = tmp_path / "run"
    squatted.mkdir(mode=0o777)
    os.chown(squatted, OTHER_UID, OTHER_UID)
    home = tmp_path / "home"
    home.mkdir()
    env = environment(home, squatted)
    sessions.append(Session(env))
    assert sessions[0].started  # not stopped by what another user made
    assert not (squatted / "remote-acp-slots").exists()
    assert held(env) == (1, None)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a directory another user's needs root")
def test_a_squatted_tmp_name_no_longer_matters(tmp_path: Path, sessions: list[Session]) -> None:
    # The old location, made first by another user: slots are not looked for there any more.
    squat = f"/tmp/remote-acp-slots-{os.geteuid()}"
    made = not os.path.exists(squat)
    if made:
        os.mkdir(squat, 0o755)
        os.chown(squat, OTHER_UID, OTHER_UID)
    try:
        home = tmp_path / "home"
        home.mkdir()
        runtime = tmp_path / "run"
        runtime.mkdir(mode=0o700)
        sessions.append(Session(environment(home, runtime)))
        assert sessions[0].started
    finally:
        if made:
            os.rmdir(squat)
