"""``remote-acp check host --reattach-window N``: the handshake starts its session with the window,
as ``run`` would, so a host that would not keep a detached session is not ready, and says why and
what to do.

The host is a real sshd of the test's own whose logins look like logind sessions: its listener is
moved into a control group named ``session-N.scope`` (where the host's check looks for one), and
the user has a runtime directory under ``/run/user``, which logind removes at a user's last
logout unless the user lingers. The default place of the sessions' files is that directory, so
the window's start refuses: nothing is started there, and the check says so with its fix. Without
the runtime directory, or without the window, the same host is ready.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shlex
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from integration.sshlab import SshLab
from integration.users import agent_pythonpath, throwaway_user, uid_processes
from tests.support.processes import wait_for
from tests.support.reattach_host import user_agent

if TYPE_CHECKING:
    from collections.abc import Iterator

    from integration.users import User

CLI = [sys.executable, "-m", "remote_acp.cli.main"]


def _hierarchy() -> Path | None:
    """The control group hierarchy a login's ``/proc/self/cgroup`` names a logind session in: the
    ``name=systemd`` one (cgroup v1), else the unified one."""
    lines = Path("/proc/self/cgroup").read_text().splitlines()
    if any(line.split(":")[1] == "name=systemd" for line in lines) and Path("/sys/fs/cgroup/systemd").is_dir():
        return Path("/sys/fs/cgroup/systemd")
    if Path("/sys/fs/cgroup/cgroup.procs").exists():
        return Path("/sys/fs/cgroup")
    return None


@contextlib.contextmanager
def session_scope(pid: int) -> Iterator[None]:
    """``pid`` (and what it forks from now on) in a control group named like a logind session's."""
    hierarchy = _hierarchy()
    if hierarchy is None:
        pytest.skip("no control group hierarchy to name a session scope in")
    parent = hierarchy / f"ra-test-{secrets.token_hex(4)}.slice"
    scope = parent / "session-77.scope"
    try:
        scope.mkdir(parents=True)
        (scope / "cgroup.procs").write_text(f"{pid}\n")
    except OSError as exc:
        with contextlib.suppress(OSError):
            parent.rmdir()
        pytest.skip(f"cannot make a session scope: {exc}")
    try:
        yield
    finally:
        for group in (scope, parent):
            for left in (group / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):  # gone meanwhile
                    (hierarchy / "cgroup.procs").write_text(f"{left}\n")
            wait_for(lambda g=group: not (g / "cgroup.procs").read_text().strip(), "the scope emptied", within=10)  # type: ignore[misc]
            group.rmdir()


@pytest.fixture
def session_host(tmp_path: Path) -> Iterator[SshLab]:
    """One sshd of the test's own whose logins are in a session scope."""
    root = tmp_path / "lab"
    root.mkdir()
    lab = SshLab(root).start(1, namespaced=False)
    try:
        listener = lab.host("lab1").process
        assert listener is not None
        with session_scope(listener.pid):
            yield lab
    finally:
        lab.stop()


@contextlib.contextmanager
def runtime_dir(user: User) -> Iterator[Path]:
    """The user's ``/run/user/UID``, as logind makes it at a login."""
    run_user = Path("/run/user")
    made_base = not run_user.exists()
    run_user.mkdir(mode=0o755, exist_ok=True)
    path = run_user / str(user.uid)
    path.mkdir(mode=0o700)
    os.chown(path, user.uid, user.gid)
    try:
        yield path
    finally:
        subprocess.run(["rm", "-rf", "--", str(path)], check=True)
        if made_base:
            with contextlib.suppress(OSError):
                run_user.rmdir()


def check(lab: SshLab, user: User, tmp_path: Path, *flags: str) -> tuple[int, dict[str, object]]:
    command, environ = user_agent(agent_pythonpath())
    done = subprocess.run(
        [
            *CLI,
            *("check", "host", "--ssh-config", str(lab.config), "--workspace", str(user.home)),
            *("--agent", shlex.join(command), "--ssh-pass-env", "PYTHONPATH", "--json", *flags),
            user.destination("lab1"),
        ],
        capture_output=True,
        text=True,
        env={**environ, "REMOTE_ACP_CACHE_DIR": str(tmp_path / "cache")},
        timeout=120,
        check=False,
    )
    (line,) = done.stdout.splitlines() or [done.stderr]
    return done.returncode, json.loads(line)


def test_a_host_that_would_not_keep_a_detached_session_is_not_ready_for_a_window(
    session_host: SshLab, tmp_path: Path
) -> None:
    with throwaway_user(session_host.client_key.with_suffix(".pub")) as user:
        with runtime_dir(user) as runtime:
            code, refused = check(session_host, user, tmp_path, "--reattach-window", "30")
            assert code == 21, refused
            assert (refused["verdict"], refused["cause"]) == ("probe_failed", "no_reattach_window"), refused
            message = str(refused["message"])
            assert f"the runtime directory {runtime}" in message and "removed at the user's last logout" in message
            assert f"loginctl enable-linger {user.name}" in message, message
            assert "enable-linger" in str(refused["fix"])
            # (the slots' directory is the session script's, made for any session: no session in it)
            assert not list(runtime.glob("**/s-*")), "the refused start left a session on the host"
            # The same host without the window: ready (the window alone asks the host to keep a session)
            code, ready = check(session_host, user, tmp_path)
            assert (code, ready["verdict"]) == (0, "ready"), ready
        # Without the runtime directory the sessions' files go to the home's cache, which stays
        code, ready = check(session_host, user, tmp_path, "--reattach-window", "30")
        assert (code, ready["verdict"]) == (0, "ready"), ready
        wait_for(lambda: not uid_processes(user.uid), "the user's processes gone", within=15)


def test_the_window_is_a_handshake_check(tmp_path: Path) -> None:
    done = subprocess.run(
        [*CLI, "check", "host", "--workspace", "/tmp", "--agent", "a", "--reattach-window", "5", "--no-handshake", "h"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and "--reattach-window is checked by the handshake's start" in done.stderr
