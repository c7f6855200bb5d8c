"""One controller, many sessions: what each one costs in descriptors and memory.

    python -m benchmarks.many_sessions [--sessions 200] [--hosts 4] [--local-only]

One process opens ``--sessions`` sessions at once and holds them idle, over ssh to a lab of real
sshd hosts on loopback (``--hosts`` of them, sessions spread evenly), after ``--sessions`` local
ones for comparison. While they are held it counts the descriptors this process has open
(``/proc/self/fd``) and the resident memory of this process, of every containing supervisor (and
of the launcher that forked them, counted in with them) and of every local ``ssh``, then prints
what one session costs in each and the arithmetic for a thousand. The command raises its soft open-file limit at start
(:func:`remote_acp.raise_open_file_limit`); so does this benchmark, and it prints both limits.
Nothing here asserts a target: DESIGN gives none for this figure.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from ._agents import agent_argv
from ._harness import benchmark_process
from ._proc import open_fds, parent_of, pss_kib, rss_kib
from ._programs import REPO
from ._report import Summary, Table, fmt_mib, fmt_s, section

if TYPE_CHECKING:
    from remote_acp.session.core import Session
    from remote_acp.targets.launch import LaunchTarget


async def hold(count: int, targets: list[LaunchTarget], workspace: str) -> dict[str, float]:
    """Open ``count`` sessions at once (round-robin over ``targets``), measure, close them."""
    from remote_acp import RemoteAcpError, SessionOptions, start_session
    from remote_acp.targets.process.agent import AgentProcess

    options = SessionOptions(command=agent_argv(), read_timeout_ms=60_000, initialize_floor_ms=120_000)
    before_fds, before_rss = open_fds(), rss_kib()
    sessions: list[Session] = []
    failures: list[str] = []
    started = time.perf_counter()
    async with anyio.create_task_group() as tg:

        async def one(index: int) -> None:
            try:
                sessions.append(await start_session(tg, workspace, options, targets[index % len(targets)]))
            except RemoteAcpError as exc:  # counted: on 2 cores, 200 logins at once are slow
                failures.append(f"{exc.kind}: {exc.message[:80]}")

        async with anyio.create_task_group() as starting:
            for index in range(count):
                starting.start_soon(one, index)
        took = time.perf_counter() - started
        held_fds, held_rss = open_fds(), rss_kib()
        procs = [p for s in sessions if isinstance(p := s._process, AgentProcess)]  # no window: one process each
        supervisor_pids = {p.supervisor_pid for p in procs}
        launchers = {parent_of(pid) for pid in supervisor_pids} - {os.getpid(), 0}
        supervisors = sum(pss_kib(pid) for pid in supervisor_pids | launchers)
        launched = sum(pss_kib(p.pid) for p in procs)  # the agent locally, the local ssh over ssh
        async with anyio.create_task_group() as closing:
            for session in sessions:
                closing.start_soon(session.aclose)
    if failures:
        print(f"{len(failures)} of {count} starts failed, e.g. {failures[0]}")
    return {
        "sessions": len(sessions),
        "start_s": took,
        "fds": (held_fds - before_fds) / len(sessions),
        "controller_kib": (held_rss - before_rss) / len(sessions),
        "supervisor_kib": supervisors / len(sessions),
        "launched_kib": launched / len(sessions),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=200, help="sessions held at once (default 200)")
    parser.add_argument("--hosts", type=int, default=4, help="loopback sshd hosts they spread over (default 4)")
    parser.add_argument("--local-only", action="store_true", help="skip the ssh lab")
    parser.add_argument("--summary-file", help="save the target checks as JSON (used by run_all)")
    args = parser.parse_args()
    summary = Summary("many_sessions")
    with benchmark_process(summary, args.summary_file):
        measure(args)


def measure(args: argparse.Namespace) -> None:
    from remote_acp import LocalTarget, raise_open_file_limit

    soft, hard = raise_open_file_limit()
    section(f"many sessions: {args.sessions} held at once by one process (open-file limit {soft}, hard {hard})")
    table = Table(
        "sessions",
        "all started in",
        "descriptors / session",
        "controller / session",
        "supervisor / session (PSS)",
        "agent or local ssh / session (PSS)",
    )
    rows: list[tuple[str, dict[str, float]]] = []
    local: list[LaunchTarget] = [LocalTarget()]
    rows.append((f"{args.sessions} local", anyio.run(hold, args.sessions, local, str(REPO))))
    if not args.local_only:
        rows.extend(over_ssh(args))
    for label, r in rows:
        table.add(
            f"{label} ({r['sessions']:.0f} held)",
            fmt_s(r["start_s"]),
            f"{r['fds']:.1f}",
            fmt_mib(r["controller_kib"]),
            fmt_mib(r["supervisor_kib"]),
            fmt_mib(r["launched_kib"]),
        )
    table.print()
    for label, r in rows:
        per = r["controller_kib"] + r["supervisor_kib"] + r["launched_kib"]
        print(
            f"{label}: a thousand such sessions need about {r['fds'] * 1000:,.0f} descriptors in the controller "
            f"and {fmt_mib(per * 1000)} of memory on this machine (controller, supervisors and "
            f"{'agents' if 'local' in label else 'local ssh processes'})."
        )


def over_ssh(args: argparse.Namespace) -> list[tuple[str, dict[str, float]]]:
    from integration.sshlab import SshLab
    from remote_acp import SshSettings, SshTarget

    with tempfile.TemporaryDirectory(prefix="ra-bench-many-") as root:
        lab = SshLab(Path(root))
        try:
            lab.start(args.hosts, namespaced=False, max_startups="1000:30:2000")
            # Two hundred logins at once on two cores take their time: a roomy start bound.
            settings = SshSettings(config_file=str(lab.config), connect_timeout_s=60)
            targets: list[LaunchTarget] = [SshTarget(h.alias, settings) for h in lab.hosts]
            result = anyio.run(hold, args.sessions, targets, "/tmp")
            # The remote trees end once their connections are gone: let them, before the
            # servers go (a server stopped first would leave its sessions' processes to us).
            deadline = time.monotonic() + 20
            while any(h.session_processes() for h in lab.hosts) and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            lab.stop()
    return [(f"{args.sessions} over ssh ({args.hosts} hosts)", result)]


if __name__ == "__main__":
    main()
