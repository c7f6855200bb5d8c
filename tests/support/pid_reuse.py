"""A probe's watcher orphaned, and its command's pid taken by another process, for real.

Run as a script (``python pid_reuse.py ...``) as the first process of a PID namespace of its own
(:func:`namespace_prefix`), where nothing else forks: it starts the probe script in ``/bin/sh``,
waits until the agent's ``--version`` runs (the agent writes its pid, then blocks on a fifo) and
the watcher is there, kills the probe shell (as when the link drops: the watcher is orphaned),
lets the agent end and reaps it, then sets ``ns_last_pid`` so that the next process, a
``sleep`` leading a session of its own, gets the agent's pid, and thus its process group's id
too. It then waits for the watcher to end and prints what happened as JSON: the watcher must be
gone after its limit, and the stranger alive. In the control (``keep``), the agent runs on
instead, and the orphaned watcher must kill it at its limit.

``SHELL_BINARY`` (an argument) is bind-mounted over ``/bin/sh`` in the namespace's own mount
namespace, so that the probe shell and the watcher (``/bin/sh -c``) both run in it.

Standard library only: it runs by path, without the repository on ``sys.path``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["namespace_prefix"]


def namespace_prefix() -> list[str] | None:
    """The argv prefix that runs a command as the first process of new PID and mount namespaces
    (with its own ``/proc``); ``None`` where this machine cannot make them (no ``unshare``, or
    neither root nor unprivileged user namespaces)."""
    unshare = shutil.which("unshare")
    if unshare is None or not sys.platform.startswith("linux"):
        return None
    prefix = [unshare, "--pid", "--fork", "--mount-proc"]
    if os.geteuid() != 0:
        prefix[1:1] = ["--user", "--map-root-user"]
    try:
        subprocess.run([*prefix, "true"], capture_output=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return prefix


def _read(pid: int, what: str) -> bytes:
    try:
        with open(f"/proc/{pid}/{what}", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _stat_fields(pid: int) -> list[bytes]:
    """``/proc/PID/stat`` from its third field on (the command name may hold anything); ``[]``
    when the process is gone."""
    raw = _read(pid, "stat")
    return raw[raw.rindex(b") ") + 2 :].split() if raw else []


def _sleeping(seconds: int) -> list[int]:
    """The processes running ``sleep SECONDS``."""
    wanted = f"sleep\0{seconds}\0".encode()
    return [int(name) for name in os.listdir("/proc") if name.isdigit() and _read(int(name), "cmdline") == wanted]


def _read_text(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def _until(condition: Callable[[], object], what: str, within: float) -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {within} s for {what}")
        time.sleep(0.01)


def _reaped(pid: int, within: float) -> int | None:
    """The wait status of ``pid`` (a child of this process, orphans included: it is the
    namespace's init) once it ended, within ``within`` seconds; ``None`` when it did not."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return status
        time.sleep(0.02)
    return None


def _start(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return fields[19].decode() if fields else None


def main(shell_binary: str, script: str, work: str, path: str, limit: int, *, swap: bool) -> dict[str, object]:
    """Run it (see the module docstring); ``limit``: the probe's bound on ``--version``.
    Without ``swap``, the agent runs on past the limit instead: the control, where the orphaned
    watcher must kill it."""
    if os.getpid() != 1:
        raise SystemExit("run this as the first process of a PID namespace of its own")
    if os.path.realpath(shell_binary) != os.path.realpath("/bin/sh"):
        subprocess.run(["mount", "--bind", shell_binary, "/bin/sh"], check=True)
    pid_file, fifo = os.path.join(work, "agent-pid"), os.path.join(work, "agent-fifo")
    os.mkfifo(fifo)
    env = {"PATH": path, "HOME": work, "SHELL": "/bin/sh"}
    with open(script, "rb") as stdin:
        # A session of its own, as sshd starts a login.
        probe = subprocess.Popen(
            ["/bin/sh", "-s"], stdin=stdin, stdout=subprocess.DEVNULL, env=env, cwd=work, start_new_session=True
        )
    _until(lambda: _read_text(pid_file).endswith("\n"), "the agent's pid", 20)
    agent = int(_read_text(pid_file))
    _until(lambda: _sleeping(limit), "the watcher's sleep", 10)
    watcher = int(_stat_fields(_sleeping(limit)[0])[1])
    runner = int(_stat_fields(agent)[1])  # the shell running the bounded command: the probe's, or a subshell
    exe = os.stat(f"/proc/{probe.pid}/exe")  # the file it runs (its path reads /bin/sh's)
    probe_shell = [exe.st_dev, exe.st_ino]
    agent_start = _start(agent)

    # The probe's shells are killed (the link dropped): the watcher and the agent are orphaned.
    # The probe's own shell first: killed second, it could reap the other before it died.
    probe.kill()
    probe.wait()
    if runner != probe.pid:
        os.kill(runner, signal.SIGKILL)
        _reaped(runner, 10)
    result: dict[str, object] = {
        "probe_shell": probe_shell,
        "agent": agent,
        "agent_start": agent_start,
        "watcher": watcher,
    }
    if not swap:  # the agent still runs at the limit: the orphaned watcher must still kill it
        status = _reaped(agent, limit + 20)
        result["agent_killed"] = status is not None and os.WIFSIGNALED(status) and os.WTERMSIG(status) == 9
        result["watcher_gone"] = _reaped(watcher, 10) is not None
        return result

    with open(fifo, "w"):
        pass  # the agent's `read` sees the end of the fifo, and it ends
    result["agent_ended"] = _reaped(agent, 10) is not None
    time.sleep(0.05)  # a start time counts clock ticks: the next process starts on a later one
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(agent - 1))
    stranger = subprocess.Popen(["sleep", "300"], start_new_session=True, env=env)
    result["stranger"], result["stranger_start"] = stranger.pid, _start(stranger.pid)
    result["armed"] = os.path.exists(f"/proc/{watcher}") and bool(_sleeping(limit))  # it had not fired yet

    result["watcher_gone"] = _reaped(watcher, limit + 20) is not None
    time.sleep(0.2)  # a kill sent as the watcher ended has landed
    result["stranger_alive"] = stranger.poll() is None
    result["stranger_status"] = stranger.returncode
    if stranger.returncode is None:
        stranger.kill()
        stranger.wait()
    return result


if __name__ == "__main__":
    shell_binary, script, work, path, limit, mode = sys.argv[1:7]
    sys.stdout.write(json.dumps(main(shell_binary, script, work, path, int(limit), swap=mode == "swap")) + "\n")
