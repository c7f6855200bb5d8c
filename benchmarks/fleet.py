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
so each run starts cold. Besides wall time it records the CPU time of each run on both sides,
each counted by a control group of its own (:mod:`benchmarks._cpu_groups`): here (every process
the contender started, including supervisors and ``ssh`` clients that no ``wait`` accounts for)
and on the hosts (the sshd listeners and everything forked under them, re-parented or not).
Targets (DESIGN section 5, at the largest size): the probe <= 1.2x the asyncssh fan-out;
the check with its handshake <= 1.25x the raw ACP handshake over ssh to the same hosts (the floor
of the same work), in wall time and in CPU (both sides); Ansible at least 4x slower than the probe.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import tempfile
import time
from pathlib import Path

from ._ansible import ansible
from ._cpu_groups import cpu_groups
from ._fleet_contenders import Fleet
from ._fleet_lab import login, missing_prerequisites
from ._harness import benchmark_process
from ._proc import processes_naming
from ._report import Check, Summary, Table, fmt_s, section
from ._timing import interleaved, median

PROBE_TARGET = 1.2
HANDSHAKE_TARGET = 1.25
ANSIBLE_TARGET = 4.0

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
        missing = missing_prerequisites(system_python=not args.as_root)
        if missing:
            print(f"skipped: this benchmark needs {', '.join(missing)}")
            return
        exe, note = (None, "ansible: left out (--no-ansible)") if args.no_ansible else ansible()
        print(note, flush=True)
        with_lab(args, sizes, exe, summary)


def with_lab(args: argparse.Namespace, sizes: list[int], ansible_exe: str | None, summary: Summary) -> None:
    from integration.sshlab import SshLab

    with tempfile.TemporaryDirectory(prefix="ra-bench-fleet-") as tmp, cpu_groups("controller", "hosts") as groups:
        if groups is None:
            raise RuntimeError("no control group could be made to count CPU time (cgroup v2 or v1 cpuacct)")
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
            for host in lab.hosts:  # everything a login starts is counted as the hosts'
                assert host.process is not None
                groups["hosts"].add(host.process.pid)
            with login(lab, root, args.as_root) as who:
                print(f"logging in as {who.note}; agent: {who.agent}", flush=True)
                fleet = Fleet(lab, root, who, ansible_exe, groups["controller"], groups["hosts"])
                results = {size: measure(args, fleet, size) for size in sizes}
                report(results, fleet, summary, max(sizes))
        finally:
            with contextlib.suppress(OSError):
                for pid in processes_naming(str(root / "cp")):
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
