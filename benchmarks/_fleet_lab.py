"""The lab side of the fleet benchmark: who logs in, the agent there, the key exchange, processes.

Shared with ``placement.py``: the sshd and interpreter it needs (the agent a throwaway user runs
is in :mod:`._agents`).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from remote_acp.targets.ssh.script import SLOT_DIR_PREFIX

from ._agents import SYSTEM_PYTHON, agent_command, lab_agent_script
from ._proc import children

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from pathlib import Path

    from integration.sshlab import SshLab

__all__ = [
    "RUN_TIMEOUT_S",
    "SETTLE_S",
    "SSHD",
    "Login",
    "login",
    "missing_prerequisites",
    "negotiated_kex",
    "reap_orphans",
    "timed",
]

SSHD: Final = "/usr/sbin/sshd"
RUN_TIMEOUT_S: Final = 600.0
SETTLE_S: Final = 30.0


def missing_prerequisites(*, system_python: bool = True) -> list[str]:
    """What a lab benchmark needs and this machine lacks: root, sshd, ssh, the system's python3."""
    return [
        what
        for what, absent in (
            ("root (the lab's sshd)", os.geteuid() != 0),
            (SSHD, not os.path.exists(SSHD)),
            ("ssh on PATH", shutil.which("ssh") is None),
            (SYSTEM_PYTHON, system_python and not os.path.exists(SYSTEM_PYTHON)),
        )
        if absent
    ]


# --------------------------------------------------------------------------- processes


def timed(
    argv: Sequence[str], *, env: dict[str, str], cwd: Path, join: Callable[[], None] | None = None
) -> tuple[float, str]:
    """Run ``argv`` to completion in a process group of its own: wall time and stdout.

    On a timeout, an error or Ctrl-C the whole group is killed (Ansible's forks and their ssh
    included). A non-zero exit raises ``RuntimeError`` with the tail of both streams. ``join``: run
    in the new process before it execs (:meth:`~benchmarks._cpu_groups.CpuGroup.join_at_exec`).
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=env,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=join,
        )
        try:
            proc.wait(timeout=RUN_TIMEOUT_S)
        except BaseException:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        elapsed = time.perf_counter() - start
        with contextlib.suppress(OSError):  # anything of the group still there (not a daemon: see settle)
            os.killpg(proc.pid, signal.SIGKILL)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        if proc.returncode != 0:
            stderr = err.read().decode(errors="replace")
            raise RuntimeError(
                f"{shlex.join(argv)} exited {proc.returncode}:\n{stdout[-1500:]}\n{stderr[-1500:]}".rstrip()
            )
        return elapsed, stdout


def reap_orphans() -> None:
    """Reap what was re-parented here and has exited (this process is a subreaper): the hosts'
    processes whose parent went first (an sshd's privileged half, a login shell, the probe's
    watcher sleep...) and the contenders' (an ``ssh`` master). Left as zombies they pile up by the
    thousand over a run and slow every scan of ``/proc``, a session's teardown sweep among them.
    Their CPU time is counted by the control groups, not here."""
    for pid, state in children():
        if state == "Z":
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)


def negotiated_kex(sshd_config: Path) -> str:
    """The key exchange asyncssh settles on with the hosts' sshd: the first of asyncssh's own
    algorithms (GSS ones aside) that ``sshd -T`` lists, as SSH's negotiation picks it."""
    from asyncssh.kex import get_default_kex_algs

    done = subprocess.run([SSHD, "-T", "-f", str(sshd_config)], capture_output=True, text=True, check=True)
    offered = next(
        line.split(None, 1)[1].split(",") for line in done.stdout.splitlines() if line.startswith("kexalgorithms ")
    )
    ours = [alg.decode() for alg in get_default_kex_algs() if not alg.startswith(b"gss-")]
    return next(alg for alg in ours if alg in offered)


# --------------------------------------------------------------------------- who logs in


@dataclass(frozen=True, slots=True)
class Login:
    """Who every contender logs in as, the workspace there, and the agent command."""

    user: str
    workspace: Path
    agent: str
    note: str


@contextlib.contextmanager
def login(lab: SshLab, root: Path, as_root: bool) -> Iterator[Login]:
    """Root (the machine's own dotfiles apply), or a throwaway user with bash and no dotfiles.

    The throwaway user cannot run this interpreter when it lives under root's home, so its agent
    is :func:`._agents.lab_agent_script` (the scriptable agent under the system's python3)."""
    if as_root:
        workspace = root / "ws"
        workspace.mkdir()
        yield Login("root", workspace, agent_command(), "root, with the machine's own dotfiles")
        return
    from integration.users import throwaway_user

    with throwaway_user(lab.client_key.with_suffix(".pub"), shell="/bin/bash") as user:
        try:
            workspace = user.makedirs(user.home / "ws")
            agent = user.write("bin/scripted-agent", lab_agent_script(), 0o755)
            yield Login(
                user.name, workspace, str(agent), f"{user.name}, a throwaway user: login shell bash, no dotfiles"
            )
        finally:
            _end_user_processes(user.uid)
            # The sessions' agent slots: one directory per user on the host (here, this machine).
            shutil.rmtree(f"{SLOT_DIR_PREFIX}{user.uid}", ignore_errors=True)


def _end_user_processes(uid: int) -> None:
    """Kill the user's processes and reap those re-parented here, so ``userdel`` (which refuses
    while any process of the user exists, zombies included) can remove the user: after an
    interrupted run, a killed contender's orphans are this process's children."""
    from integration.users import uid_processes

    deadline = time.monotonic() + 10
    while True:
        for pid in uid_processes(uid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:  # only dead children: the live sshd stay
                pass
        if not uid_processes(uid) or time.monotonic() > deadline:
            return
        time.sleep(0.02)
