"""``remote-acp check host`` over a loopback fleet, against a bare asyncssh fan-out and Ansible.

    python -m benchmarks.fleet [--hosts 1,10,50] [--runs 3] [--warmup 1] [--no-ansible] [--as-root]

A lab of real sshd hosts on loopback (``integration.sshlab``: one sshd per address 127.0.0.2 and
up, its own host keys, client key, known_hosts and an ssh_config with the aliases ``lab1``...;
``MaxStartups`` raised so that fifty logins at once are never dropped; needs root and
``/usr/sbin/sshd``). Every contender logs in as a throwaway user (``integration.users``: login
shell bash, no dotfiles), so what the machine's own accounts run at login takes no part (root's
``.bashrc`` here runs ``pyenv init`` on every login, which fifty logins at once serialize on
pyenv's lock); ``--as-root`` logs in as root instead. For each fleet size these run interleaved,
one of each per round, each a whole process (or processes) against the same hosts, every host at
once:

- the floor: ``benchmarks/_fanout.py``, a python process that connects to every host with asyncssh
  (the lab's key and known_hosts, addresses given, nothing resolved), runs ``true``, closes;
- ``ssh HOST true`` to every host at once (OpenSSH, the lab's ssh_config): the floor of a
  handshake, which logs in with OpenSSH as every session does;
- the same with OpenSSH's own default key exchange, to show what it costs (see below);
- the floor of a handshake: ``benchmarks/_acp_fanout.py``, a python process that logs in to every
  host at once with ``ssh``, starts the agent, sends ``initialize`` and ``session/new``, closes
  its stdin and waits (no probe, no supervisor, no login-proofing);
- ``remote-acp check host @fleet --no-handshake --json`` (the probe), our inventory file listing
  the hosts and the lab's ssh_config (``--concurrency`` the fleet's size), as a check runs again
  (``ssh -G``'s answers kept from the last run) and with nothing kept;
- the same with the handshake: one login per host, the session's own, whose login-proof script
  runs the probe before the scriptable agent starts as a session starts it, then
  ``initialize``, ``session/new``, teardown;
- ``ansible all -m ping`` over an INI inventory of the same names, the same ssh_config
  (``ansible_ssh_args``), ``forks`` the fleet's size, pipelining on and ansible's own
  ``ControlPersist`` connection sharing (its faster setting; DESIGN section 5 measured 35.7 s
  for 50 hosts with pipelining, 136 s without). ansible-core is installed from PyPI into a venv
  of its own under ``.tools/`` on first use; ``$REMOTE_ACP_BENCH_ANSIBLE`` names another
  ``ansible`` executable.

One key exchange for all. asyncssh (without liboqs) cannot do OpenSSH 9.2's default,
``sntrup761x25519-sha512``, whose key generation costs the OpenSSH client about 0.13 s of CPU per
login here, five times the rest of the login; the fan-out and the probe settle on the first of
asyncssh's algorithms the hosts' sshd offers (``curve25519-sha256``, asked of ``sshd -T``). So
that the ratios measure the contenders and not two key exchanges, every OpenSSH contender
(``ssh true``, the handshake's ssh, Ansible's) is given that same algorithm through the
benchmark's ssh_config (the lab's, plus ``KexAlgorithms``); the extra ``ssh true`` row and the
handshake with OpenSSH's default key exchange show the difference.

Every run must find every host ready (or ``SUCCESS``), or the benchmark stops. Between runs the
benchmark waits until no host has a connection left, and ends Ansible's ControlPersist masters,
so each run starts cold. Besides wall time it records the CPU time of each run on both sides:
here (every process the contender started) and on the hosts (the sshd listeners and all they
reaped). Targets (DESIGN section 5, at the largest size): the probe <= 1.2x the asyncssh fan-out;
the check with its handshake <= 1.25x the raw ACP handshake over ssh to the same hosts (the floor
of the same work), in wall time and in CPU (both sides); Ansible at least 4x slower than the probe.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from remote_acp.targets.ssh_script import SLOT_DIR_PREFIX

from ._common import (
    PY,
    REPO,
    Check,
    Summary,
    Table,
    agent_command,
    benchmark_process,
    fmt_s,
    interleaved,
    median,
    section,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from integration.sshlab import SshLab

SSHD = "/usr/sbin/sshd"
SYSTEM_PYTHON = "/usr/bin/python3"
"""Runs the throwaway user's agent: this interpreter may sit where that user cannot reach."""
ANSIBLE_VERSION = "2.19.14"
"""The newest ansible-core whose controller runs on Python 3.11."""
ANSIBLE_ENV = "REMOTE_ACP_BENCH_ANSIBLE"
ANSIBLE_PREFIX = REPO / ".tools" / f"ansible-core-{ANSIBLE_VERSION}"
PROBE_TARGET = 1.2
HANDSHAKE_TARGET = 1.25
ANSIBLE_TARGET = 4.0
RUN_TIMEOUT_S = 600.0
SETTLE_S = 30.0

# DESIGN section 5, 50 loopback hosts, for orientation only (the ratios use this run's anchors).
DESIGN_REF = {"fan-out": "7.6 s (32 at a time)", "ansible": "35.7 s (pipelining)"}

FANOUT = "asyncssh fan-out"
SSH_FANOUT = "ssh true, all at once"
SSH_DEFAULT_KEX = "ssh true, OpenSSH's default KEX"
RAW_ACP = "raw ACP handshake over ssh"
PROBE = "check host --no-handshake"
PROBE_COLD = "check host --no-handshake, nothing kept"
HANDSHAKE = "check host (handshake)"
HANDSHAKE_DEFAULT_KEX = "check host (handshake), OpenSSH's default KEX"
ANSIBLE = "ansible all -m ping"


# --------------------------------------------------------------------------- ansible


def ansible() -> tuple[str | None, str]:
    """The ``ansible`` executable (installed on first use) and a line saying which one."""
    explicit = os.environ.get(ANSIBLE_ENV)
    if explicit:
        found = shutil.which(explicit)
        if found is None:
            return None, f"ansible: {explicit} (from ${ANSIBLE_ENV}) not found; ansible rows skipped"
        return found, f"ansible: {found} (from ${ANSIBLE_ENV})"
    exe = ANSIBLE_PREFIX / "bin" / "ansible"
    marker = ANSIBLE_PREFIX / ".installed"
    if not marker.exists():
        # A venv cannot be moved after it is made (its scripts name their interpreter), so it is
        # made in place; the marker, written last, tells a whole install from an interrupted one.
        shutil.rmtree(ANSIBLE_PREFIX, ignore_errors=True)
        print(f"installing ansible-core {ANSIBLE_VERSION} into {ANSIBLE_PREFIX} (once) ...", flush=True)
        try:
            subprocess.run([PY, "-m", "venv", str(ANSIBLE_PREFIX)], check=True, capture_output=True, timeout=300)
            subprocess.run(
                [
                    str(ANSIBLE_PREFIX / "bin" / "python"),
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    f"ansible-core=={ANSIBLE_VERSION}",
                ],
                check=True,
                capture_output=True,
                timeout=900,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            why = (
                exc.stderr.decode(errors="replace").strip().splitlines()[-1:]
                if isinstance(exc, subprocess.CalledProcessError)
                else [str(exc)]
            )
            shutil.rmtree(ANSIBLE_PREFIX, ignore_errors=True)
            return (
                None,
                f"ansible: not available, pip install ansible-core failed ({' '.join(why)}); ansible rows skipped",
            )
        marker.write_text(ANSIBLE_VERSION + "\n")
    return str(exe), f"ansible: ansible-core {ANSIBLE_VERSION} ({exe})"


# --------------------------------------------------------------------------- processes


def timed(argv: Sequence[str], *, env: dict[str, str], cwd: Path) -> tuple[float, str]:
    """Run ``argv`` to completion in a process group of its own: wall time and stdout.

    On a timeout, an error or Ctrl-C the whole group is killed (Ansible's forks and their ssh
    included). A non-zero exit raises ``RuntimeError`` with the tail of both streams.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, cwd=cwd, start_new_session=True
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


def _listener_cpu_s(lab: SshLab) -> float:
    """CPU seconds of the lab's sshd listeners and every descendant they reaped: once no
    connection is left, all the "remote" work (sshd, the login shell, the probe script, the agent)."""
    total = 0
    for host in lab.hosts:
        if host.process is None:
            continue
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{host.process.pid}/stat").read_text()
            fields = stat[stat.rfind(")") + 2 :].split()
            total += sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
    return total / os.sysconf("SC_CLK_TCK")


def _children_cpu_s() -> float:
    """CPU seconds of every descendant this process has reaped (the contender, Ansible's
    ControlPersist masters, re-parented here and reaped by :meth:`Fleet.settle`, and what
    :func:`_reap_orphans` reaped)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _reap_orphans() -> tuple[float, float]:
    """Reap what was re-parented here and has exited (this process is a subreaper): the hosts'
    processes whose parent went first (an sshd's privileged half, a login shell, the probe's
    watcher sleep...) and the contenders' (an ``ssh`` master). Left as zombies they pile up by the
    thousand over a run and slow every scan of ``/proc``, a session's teardown sweep among them.
    CPU seconds reaped: (an ``ssh`` client's: here, the rest: on the hosts)."""
    here = hosts = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            name, fields = stat[stat.find("(") + 1 : stat.rfind(")")], stat[stat.rfind(")") + 2 :].split()
            if fields[0] != "Z" or int(fields[1]) != os.getpid():
                continue
            pid, _, usage = os.wait4(int(entry), os.WNOHANG)
        except (OSError, ValueError, IndexError):
            continue
        if pid:
            cpu = usage.ru_utime + usage.ru_stime
            if name == "ssh":
                here += cpu
            else:
                hosts += cpu
    return here, hosts


def _processes_naming(text: str) -> list[int]:
    """Pids of every process whose command line contains ``text``."""
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if text.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                found.append(int(entry))
    return found


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


# --------------------------------------------------------------------------- the fleet


@dataclass(frozen=True, slots=True)
class Login:
    """Who every contender logs in as, the workspace there, and the agent command."""

    user: str
    workspace: Path
    agent: str
    note: str


AGENT_WRAPPER = """#!/bin/sh
case "$1" in --version) echo "scripted-agent 1.0.0"; exit 0 ;; esac
PYTHONPATH={repo} exec {python} -m remote_acp.testing.scripted_agent "$@"
"""


@contextlib.contextmanager
def login(lab: SshLab, root: Path, as_root: bool) -> Iterator[Login]:
    """Root (the machine's own dotfiles apply), or a throwaway user with bash and no dotfiles.

    The throwaway user cannot run this interpreter when it lives under root's home, so its agent
    is a small script that runs the scriptable agent with the system's python3 and a readable
    copy of this checkout's package on ``PYTHONPATH`` (the agent needs nothing but the standard
    library)."""
    if as_root:
        workspace = root / "ws"
        workspace.mkdir()
        yield Login("root", workspace, agent_command(), "root, with the machine's own dotfiles")
        return
    from integration.users import agent_pythonpath, throwaway_user

    with throwaway_user(lab.client_key.with_suffix(".pub"), shell="/bin/bash") as user:
        try:
            workspace = user.makedirs(user.home / "ws")
            wrapper = AGENT_WRAPPER.format(repo=agent_pythonpath(), python=SYSTEM_PYTHON)
            agent = user.write("bin/scripted-agent", wrapper, 0o755)
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


class Fleet:
    """The lab, the inventories for each size, and the command of each contender."""

    def __init__(self, lab: SshLab, root: Path, who: Login, ansible_exe: str | None) -> None:
        self.lab = lab
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
            elapsed, stdout = timed(argv, env=env, cwd=self.root)
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
        elapsed, stdout = timed(argv, env=self.env, cwd=REPO)
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
                elapsed, stdout = timed(argv, env=self.ansible_env, cwd=self.root)
            finally:
                self.settle()
            succeeded = sum(" | SUCCESS " in line for line in stdout.splitlines())
            if succeeded != count:
                raise RuntimeError(f"ansible ping succeeded on {succeeded} of {count} hosts:\n{stdout[-1500:]}")
            return elapsed

        return run

    def counted(self, count: int, name: str, run: Callable[[], float]) -> Callable[[], float]:
        """``run`` (which settles the hosts before it returns), noting the CPU time it took here
        and on the hosts."""
        samples = self.cpu.setdefault((count, name), [])

        def counted_run() -> float:
            local, remote = _children_cpu_s(), _listener_cpu_s(self.lab)
            elapsed = run()
            _, orphans = _reap_orphans()  # counted in _children_cpu_s, but the hosts' work
            samples.append((_children_cpu_s() - local - orphans, _listener_cpu_s(self.lab) - remote + orphans))
            return elapsed

        return counted_run

    def settle(self) -> None:
        """End Ansible's ControlPersist masters and wait until no host has a connection left, so
        the next run starts cold and alone."""
        for pid in _processes_naming(str(self.control_dir)):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + SETTLE_S
        while time.monotonic() < deadline:
            masters = _processes_naming(str(self.control_dir))
            for pid in masters:  # re-parented to this process (a subreaper): reap them
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(pid, os.WNOHANG)
            if not masters and not any(h.session_processes() for h in self.lab.hosts):
                return
            time.sleep(0.05)
        raise RuntimeError(f"hosts still had connections {SETTLE_S:g} s after a run")


# --------------------------------------------------------------------------- measuring


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", default="1,10,50", help="fleet sizes, comma-separated (default 1,10,50)")
    parser.add_argument("--runs", type=int, default=3, help="recorded rounds per size (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="unrecorded rounds first, Ansible's excepted (default 1)")
    parser.add_argument("--no-ansible", action="store_true", help="leave Ansible out")
    parser.add_argument(
        "--as-root",
        action="store_true",
        help="log in as root with the machine's dotfiles (default: a throwaway user, bash, no dotfiles)",
    )
    parser.add_argument("--summary-file", help="save the target checks as JSON (used by run_all)")
    args = parser.parse_args()
    sizes = sorted({int(n) for n in args.hosts.split(",") if n.strip()})
    summary = Summary("fleet")
    with benchmark_process(summary, args.summary_file):
        missing = [
            what
            for what, absent in (
                ("root (the lab's sshd)", os.geteuid() != 0),
                (SSHD, not os.path.exists(SSHD)),
                ("ssh on PATH", shutil.which("ssh") is None),
                (SYSTEM_PYTHON, not args.as_root and not os.path.exists(SYSTEM_PYTHON)),
            )
            if absent
        ]
        if missing:
            print(f"skipped: this benchmark needs {', '.join(missing)}")
            return
        exe, note = (None, "ansible: left out (--no-ansible)") if args.no_ansible else ansible()
        print(note, flush=True)
        with_lab(args, sizes, exe, summary)


def with_lab(args: argparse.Namespace, sizes: list[int], ansible_exe: str | None, summary: Summary) -> None:
    from integration.sshlab import SshLab

    with tempfile.TemporaryDirectory(prefix="ra-bench-fleet-") as tmp:
        root = Path(tmp)
        (root / "lab").mkdir()
        lab = SshLab(root / "lab")
        try:
            started = time.perf_counter()
            # Every host connected to at once: sshd's default MaxStartups (10:30:100) would drop
            # some of fifty parallel logins per listener; one listener per host makes that moot,
            # but a roomy limit keeps a slow login from being dropped on a loaded machine.
            lab.start(max(sizes), namespaced=False, max_startups="1000:30:2000")
            print(f"lab: {len(lab.hosts)} sshd on 127.0.0.2..., started in {fmt_s(time.perf_counter() - started)}")
            with login(lab, root, args.as_root) as who:
                print(f"logging in as {who.note}; agent: {who.agent}", flush=True)
                fleet = Fleet(lab, root, who, ansible_exe)
                results = {size: measure(args, fleet, size) for size in sizes}
                report(results, fleet, summary, max(sizes))
        finally:
            with contextlib.suppress(OSError):
                for pid in _processes_naming(str(root / "cp")):
                    os.kill(pid, signal.SIGKILL)
            lab.stop()


def measure(args: argparse.Namespace, fleet: Fleet, size: int) -> dict[str, list[float]]:
    contenders = {
        FANOUT: fleet.fan_out(size),
        SSH_FANOUT: fleet.ssh_fan_out(size, fleet.config),
        SSH_DEFAULT_KEX: fleet.ssh_fan_out(size, fleet.lab.config),
        RAW_ACP: fleet.raw_handshake(size),
        PROBE: fleet.check_host(size, PROBE, handshake=False, config=fleet.config),
        PROBE_COLD: fleet.check_host(size, PROBE_COLD, handshake=False, config=fleet.config, cold=True),
        HANDSHAKE: fleet.check_host(size, HANDSHAKE, handshake=True, config=fleet.config),
        HANDSHAKE_DEFAULT_KEX: fleet.check_host(size, HANDSHAKE_DEFAULT_KEX, handshake=True, config=fleet.lab.config),
    }
    if fleet.ansible_exe is not None:
        contenders[ANSIBLE] = fleet.ansible_ping(size)
    contenders = {name: fleet.counted(size, name, run) for name, run in contenders.items()}
    started = time.perf_counter()
    samples = interleaved(contenders, args.runs, args.warmup, cold={ANSIBLE})
    print(f"{size} hosts: {args.runs} rounds in {fmt_s(time.perf_counter() - started)}", flush=True)
    return samples


def report(results: dict[int, dict[str, list[float]]], fleet: Fleet, summary: Summary, largest: int) -> None:
    section(
        f"fleet: whole-process wall time, every host at once (median of the rounds); OpenSSH logins use "
        f"{fleet.kex}, as the fan-out's, unless the column says otherwise"
    )
    table = Table(
        "hosts",
        FANOUT,
        SSH_FANOUT,
        SSH_DEFAULT_KEX,
        RAW_ACP,
        PROBE,
        PROBE_COLD,
        HANDSHAKE,
        HANDSHAKE_DEFAULT_KEX,
        ANSIBLE,
        "probe / fan-out",
        "handshake / fan-out",
        "handshake / (fan-out + raw)",
        "ansible / probe",
        "ansible / handshake",
    )
    for size, samples in results.items():
        m = {name: median(values) for name, values in samples.items()}
        ans = m.get(ANSIBLE, float("nan"))
        table.add(
            str(size),
            fmt_s(m[FANOUT]),
            fmt_s(m[SSH_FANOUT]),
            fmt_s(m[SSH_DEFAULT_KEX]),
            fmt_s(m[RAW_ACP]),
            fmt_s(m[PROBE]),
            fmt_s(m[PROBE_COLD]),
            fmt_s(m[HANDSHAKE]),
            fmt_s(m[HANDSHAKE_DEFAULT_KEX]),
            fmt_s(ans) if ANSIBLE in m else "-",
            f"{m[PROBE] / m[FANOUT]:.2f}x",
            f"{m[HANDSHAKE] / m[FANOUT]:.2f}x",
            f"{m[HANDSHAKE] / (m[FANOUT] + m[RAW_ACP]):.2f}x",
            f"{ans / m[PROBE]:.1f}x" if ANSIBLE in m else "-",
            f"{ans / m[HANDSHAKE]:.1f}x" if ANSIBLE in m else "-",
        )
    table.print()
    print(f"DESIGN ref (50 hosts): fan-out {DESIGN_REF['fan-out']}, ansible ping {DESIGN_REF['ansible']}")

    section("fleet: every run (seconds)")
    runs = Table("hosts / contender", "runs", "min", "max")
    for size, samples in results.items():
        for name, values in samples.items():
            runs.add(f"{size} / {name}", " ".join(f"{v:.2f}" for v in values), fmt_s(min(values)), fmt_s(max(values)))
    runs.print()

    section("fleet: inside the processes (seconds, medians over runs and hosts)")
    inner = Table(
        "hosts",
        "fan-out: first connect to last close",
        "probe: latency per host (median / max)",
        "handshake: per host (median / max)",
    )
    for size in results:
        probe, shake = fleet.latencies[(size, PROBE)], fleet.latencies[(size, HANDSHAKE)]
        inner.add(
            str(size),
            fmt_s(median(fleet.connected[size])),
            f"{fmt_s(median(probe))} / {fmt_s(max(probe))}",
            f"{fmt_s(median(shake))} / {fmt_s(max(shake))}",
        )
    inner.print()

    section("fleet: CPU seconds per run (medians; every host is this machine, so its 2 cores do both sides)")
    cpu = Table("hosts / contender", "here (client)", "on the hosts (sshd, shell, agent)", "both", "both / fan-out's")
    for size, samples in results.items():
        floor = median([a + b for a, b in fleet.cpu[(size, FANOUT)]])
        for name in samples:
            per_run = fleet.cpu[(size, name)]
            both = median([a + b for a, b in per_run])
            cpu.add(
                f"{size} / {name}",
                fmt_s(median([a for a, _ in per_run])),
                fmt_s(median([b for _, b in per_run])),
                fmt_s(both),
                f"{both / floor:.2f}x",
            )
    cpu.print()

    m = {name: median(values) for name, values in results[largest].items()}
    note = f"{largest} hosts"
    summary.add(Check(f"check host --no-handshake / asyncssh fan-out, {note}", m[PROBE] / m[FANOUT], PROBE_TARGET, "x"))
    summary.add(
        Check(
            f"check host (handshake) / raw ACP handshake, wall, {note}",
            m[HANDSHAKE] / m[RAW_ACP],
            HANDSHAKE_TARGET,
            "x",
        )
    )
    cpu_both = {name: median([a + b for a, b in fleet.cpu[(largest, name)]]) for name in (HANDSHAKE, RAW_ACP)}
    summary.add(
        Check(
            f"check host (handshake) / raw ACP handshake, CPU, {note}",
            cpu_both[HANDSHAKE] / cpu_both[RAW_ACP],
            HANDSHAKE_TARGET,
            "x",
        )
    )
    if ANSIBLE in m:
        summary.add(
            Check(
                f"ansible all -m ping / check host --no-handshake, {note}",
                m[ANSIBLE] / m[PROBE],
                ANSIBLE_TARGET,
                "x",
                higher_is_better=True,
            )
        )


if __name__ == "__main__":
    main()
