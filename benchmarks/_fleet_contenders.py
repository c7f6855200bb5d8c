"""The contenders of the fleet benchmark: each one's command over the lab, run and counted.

:class:`Fleet` holds the lab, the inventories for each fleet size, and a runner per contender
(``check host`` with and without the handshake, the asyncssh fan-out, ``ssh true`` everywhere,
the raw ACP handshake, Ansible). Each runner starts its processes in the controller's control
group, checks that every host answered, and waits until no host has a connection left.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from typing import TYPE_CHECKING, Any

from ._fleet_lab import RUN_TIMEOUT_S, SETTLE_S, negotiated_kex, reap_orphans, timed
from ._proc import processes_naming
from ._programs import PY, REPO

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from integration.sshlab import SshLab

    from ._cpu_groups import CpuGroup
    from ._fleet_lab import Login

__all__ = ["Fleet"]


class Fleet:
    """The lab, the inventories for each size, and the command of each contender."""

    def __init__(
        self, lab: SshLab, root: Path, who: Login, ansible_exe: str | None, controller: CpuGroup, on_hosts: CpuGroup
    ) -> None:
        self.lab = lab
        self.controller, self.on_hosts = controller, on_hosts
        self.root = root
        self.login = who
        self.ansible_exe = ansible_exe
        self.workspace = who.workspace
        self.kex = negotiated_kex(lab.hosts[0].root / "sshd_config")
        # The lab's ssh_config, every OpenSSH login held to the fan-out's key exchange.
        self.config = root / "ssh_config"
        self.config.write_text(f"{lab.config.read_text()}\nHost *\n  KexAlgorithms {self.kex}\n")
        self.control_dir = root / "cp"  # Ansible's ControlPath directory: its masters name it
        self.control_dir.mkdir()
        for sub in ("ansible-home", "ansible-local", "cache", "state", "cold"):
            (root / sub).mkdir()
        (root / "ansible.cfg").write_text("")  # no ansible.cfg of the user's or the system's applies
        self.latencies: dict[tuple[int, str], list[float]] = {}  # per host, from check host's JSON
        self.cpu: dict[tuple[int, str], list[tuple[float, float]]] = {}  # (local, remote) CPU seconds per run
        self.connected: dict[int, list[float]] = {}  # the fan-out's own figure
        self.env = {
            **os.environ,
            "REMOTE_ACP_CACHE_DIR": str(root / "cache"),
            "REMOTE_ACP_STATE_DIR": str(root / "state"),
        }
        self.ansible_env = {
            **os.environ,
            "ANSIBLE_CONFIG": str(root / "ansible.cfg"),
            "ANSIBLE_HOME": str(root / "ansible-home"),
            "ANSIBLE_LOCAL_TEMP": str(root / "ansible-local"),
            "ANSIBLE_REMOTE_TEMP": str(self.workspace / ".ansible-tmp"),
            "ANSIBLE_SSH_CONTROL_PATH_DIR": str(self.control_dir),
            "ANSIBLE_SSH_ARGS": f"-F {self.config} -C -o ControlMaster=auto -o ControlPersist=60s",
            "ANSIBLE_PIPELINING": "True",
            # Named, not discovered: discovery would find whatever python3 the login's PATH has
            # first (a pyenv shim here), and it costs a round trip that would only slow Ansible.
            "ANSIBLE_PYTHON_INTERPRETER": "/usr/bin/python3",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
        }

    def write_inventories(self, count: int) -> tuple[Path, Path]:
        """Our YAML and an Ansible INI, listing the first ``count`` hosts by their ssh_config alias.

        The hosts carry a group of their own (``fleet``): the ssh_config's aliases join the merged
        inventory too, and ``@all`` would select all of them. Each host's capacity is the fleet's
        size: the agent slots live in one directory per user on the host, and every lab host is
        this machine, so they share one set of slots."""
        names = [h.alias for h in self.lab.hosts[:count]]
        ours = self.root / f"inventory-{count}.yaml"
        ours.write_text(
            f"defaults:\n  user: {self.login.user}\n  capacity: {count}\n  groups: [fleet]\nhosts:\n"
            + "".join(f"  {name}:\n" for name in names)
        )
        ini = self.root / f"hosts-{count}.ini"
        ini.write_text("".join(f"{name}\n" for name in names) + f"\n[all:vars]\nansible_user={self.login.user}\n")
        return ours, ini

    def check_host(
        self, count: int, name: str, *, handshake: bool, config: Path, cold: bool = False
    ) -> Callable[[], float]:
        """``check host`` over the first ``count`` hosts; ``cold``: with an empty cache directory
        each run, so no ``ssh -G`` answer is kept from the last one."""
        inventory, _ = self.write_inventories(count)
        argv = [
            PY,
            "-m",
            "remote_acp.cli.main",
            "check",
            "host",
            "@fleet",
            *([] if handshake else ["--no-handshake"]),
            "--agent",
            self.login.agent,
            "--workspace",
            str(self.workspace),
            "--inventory",
            str(inventory),
            "--ssh-config",
            str(config),
            "--json",
            "--concurrency",
            str(count),
            "--connect-timeout",
            "60",
        ]
        self.latencies[(count, name)] = []

        def run() -> float:
            env = self.env
            if cold:  # (a directory of its own: the root's listing is part of what is kept)
                shutil.rmtree(self.root / "cold" / "cache", ignore_errors=True)
                env = {**env, "REMOTE_ACP_CACHE_DIR": str(self.root / "cold" / "cache")}
            elapsed, stdout = timed(argv, env=env, cwd=self.root, join=self.controller.join_at_exec())
            hosts = [json.loads(line) for line in stdout.splitlines() if line.strip()]
            bad = [h for h in hosts if h["verdict"] != "ready" or h["handshake"] is not handshake]
            if len(hosts) != count or bad:
                raise RuntimeError(f"check host found {len(hosts)} hosts, not ready: {bad[:2]}")
            self.latencies[(count, name)].extend(h["latency_ms"] / 1000 for h in hosts)
            self.settle()
            return elapsed

        return run

    def fan_out(self, count: int) -> Callable[[], float]:
        argv = [
            PY,
            "-m",
            "benchmarks._fanout",
            "--user",
            self.login.user,
            "--key",
            str(self.lab.client_key),
            "--known-hosts",
            str(self.lab.known_hosts),
            *(f"{h.address}:{h.port}" for h in self.lab.hosts[:count]),
        ]
        self.connected[count] = []

        def run() -> float:
            elapsed, result = self.run_fanout(argv, count, "the fan-out")
            self.connected[count].append(result["connected_s"])
            return elapsed

        return run

    def ssh_fan_out(self, count: int, config: Path) -> Callable[[], float]:
        """``ssh HOST true`` to every host at once, through ``config``: the floor of anything that
        logs in with OpenSSH, as the handshake does (through ``SshTarget``)."""
        argvs = [["ssh", "-F", str(config), "-l", self.login.user, h.alias, "true"] for h in self.lab.hosts[:count]]

        join = self.controller.join_at_exec()

        def run() -> float:
            procs: list[subprocess.Popen[bytes]] = []
            with tempfile.TemporaryFile() as err:
                start = time.perf_counter()
                try:
                    for argv in argvs:  # one by one: an interrupted start still kills those started
                        procs.append(  # noqa: PERF401
                            subprocess.Popen(
                                argv,
                                stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL,
                                stderr=err,
                                start_new_session=True,
                                preexec_fn=join,
                            )
                        )
                    for proc in procs:
                        proc.wait(timeout=RUN_TIMEOUT_S)
                except BaseException:
                    for proc in procs:
                        with contextlib.suppress(OSError):
                            os.killpg(proc.pid, signal.SIGKILL)
                        proc.wait()
                    raise
                elapsed = time.perf_counter() - start
                failed = [p for p in procs if p.returncode != 0]
                if failed:
                    err.seek(0)
                    raise RuntimeError(
                        f"ssh true failed on {len(failed)} of {count} hosts: {err.read().decode()[-1500:]}"
                    )
            self.settle()
            return elapsed

        return run

    def raw_handshake(self, count: int) -> Callable[[], float]:
        argv = [
            PY,
            "-m",
            "benchmarks._acp_fanout",
            "--config",
            str(self.config),
            "--user",
            self.login.user,
            "--agent",
            self.login.agent,
            "--workspace",
            str(self.workspace),
            *(h.alias for h in self.lab.hosts[:count]),
        ]

        def run() -> float:
            return self.run_fanout(argv, count, "the bare handshake")[0]

        return run

    def run_fanout(self, argv: Sequence[str], count: int, what: str) -> tuple[float, dict[str, Any]]:
        """Run one of the fan-out scripts (its last line: ``{"ok": N, "failed": [...]}``), which
        must reach all ``count`` hosts; then settle. Wall time and the script's result."""
        elapsed, stdout = timed(argv, env=self.env, cwd=REPO, join=self.controller.join_at_exec())
        result: dict[str, Any] = json.loads(stdout.splitlines()[-1])
        if result["ok"] != count:
            raise RuntimeError(f"{what} reached {result['ok']} of {count} hosts: {result['failed'][:2]}")
        self.settle()
        return elapsed, result

    def ansible_ping(self, count: int) -> Callable[[], float]:
        assert self.ansible_exe is not None
        _, ini = self.write_inventories(count)
        argv = [self.ansible_exe, "all", "-i", str(ini), "-m", "ping", "-f", str(count)]

        def run() -> float:
            try:
                elapsed, stdout = timed(argv, env=self.ansible_env, cwd=self.root, join=self.controller.join_at_exec())
            finally:
                self.settle()
            succeeded = sum(" | SUCCESS " in line for line in stdout.splitlines())
            if succeeded != count:
                raise RuntimeError(f"ansible ping succeeded on {succeeded} of {count} hosts:\n{stdout[-1500:]}")
            return elapsed

        return run

    def counted(self, count: int, name: str, run: Callable[[], float]) -> Callable[[], float]:
        """``run`` (which settles the hosts before it returns), noting the CPU time it took here
        (the contender's control group) and on the hosts (theirs)."""
        samples = self.cpu.setdefault((count, name), [])

        def counted_run() -> float:
            here, there = self.controller.usage_s(), self.on_hosts.usage_s()
            elapsed = run()
            reap_orphans()
            samples.append((self.controller.usage_s() - here, self.on_hosts.usage_s() - there))
            return elapsed

        return counted_run

    def settle(self) -> None:
        """End Ansible's ControlPersist masters and wait until no host has a connection left, so
        the next run starts cold and alone."""
        for pid in processes_naming(str(self.control_dir)):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + SETTLE_S
        while time.monotonic() < deadline:
            masters = processes_naming(str(self.control_dir))
            for pid in masters:  # re-parented to this process (a subreaper): reap them
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(pid, os.WNOHANG)
            if not masters and not any(h.session_processes() for h in self.lab.hosts):
                return
            time.sleep(0.05)
        raise RuntimeError(f"hosts still had connections {SETTLE_S:g} s after a run")
