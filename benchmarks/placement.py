"""Placing sessions on a fleet: ``HostPool`` against a hand-written loop over ``host_target``.

    python -m benchmarks.placement [--hosts 10] [--sessions 50] [--capacity 5] [--runs 3] [--warmup 1]

A lab of real sshd hosts on loopback (``integration.sshlab``; needs root and ``/usr/sbin/sshd``).
Each host is logged in to as a throwaway user of its own (``integration.users``: bash, no
dotfiles): the lab's hosts are one machine, and a user's agent slots are the machine's, so one
user per host gives every host its own slots. The agent (the scriptable agent under the system's
python3) and the workspace sit at the same paths for every user.

Each round places ``--sessions`` sessions at once (every one started together, each held until
all are placed, then all closed), interleaved:

- **by hand**: what a scheduler writes without the pool: session ``i`` tries the hosts in turn
  from host ``i mod hosts`` (so the sessions spread evenly) with
  ``open_session(..., host_target(host, settings, take_slot=True))``, and moves to the next host
  when one is at capacity;
- **pool, warm**: ``HostPool.session()`` on a pool whose hosts were probed before the round (the
  probe is not timed): a scheduler's steady state;
- **pool, cold**: the same with a new pool, its first probe of every host timed with it.

For each: wall time of the round, the controller's CPU time (this process and every process it
started: the ``ssh`` clients, the session supervisors and their launcher), the hosts' CPU time
(the sshd listeners and everything forked under them: logins, session scripts, probes, agents),
each counted by a control group of its own (:mod:`benchmarks._cpu_groups`: a re-parented login
shell stays the hosts', a supervisor the kernel reaped stays the controller's), and logins per
session (``Accepted publickey`` lines in the hosts' sshd logs).
Targets (DESIGN section 5): the warm pool costs one login per session, and is no slower and no
costlier in controller CPU than the loop.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from remote_acp.targets.ssh.script import SLOT_DIR_PREFIX

from ._agents import lab_agent_script
from ._cpu_groups import cpu_groups
from ._fleet_lab import missing_prerequisites
from ._harness import benchmark_process
from ._report import Check, Summary, Table, fmt_s, section
from ._timing import median

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Iterator

    from hostinv import Host
    from integration.sshlab import SshLab
    from integration.users import User
    from remote_acp.fleet.pool import HostPool
    from remote_acp.targets.ssh.settings import SshSettings

    from ._cpu_groups import CpuGroup

ROUND_TIMEOUT_S = 300.0
SETTLE_S = 30.0
BY_HAND = "by hand (host_target, take_slot)"
WARM = "HostPool, warm"
COLD = "HostPool, cold (its probe timed)"


@dataclass(slots=True)
class Sample:
    wall_s: float
    cpu_s: float
    host_cpu_s: float
    logins: int
    failed: int


@dataclass(slots=True)
class Fleet:
    """The lab, one user per host, the shared agent and workspace."""

    lab: SshLab
    users: list[User]
    agent: str
    workspace: str
    capacity: int
    controller: CpuGroup
    on_hosts: CpuGroup
    samples: dict[str, list[Sample]] = field(default_factory=dict)

    @property
    def hosts(self) -> list[Host]:
        from hostinv import Host

        return [
            Host(name=h.alias, address=h.alias, user=u.name, capacity=self.capacity)
            for h, u in zip(self.lab.hosts, self.users, strict=True)
        ]

    def settings(self) -> SshSettings:
        from remote_acp.targets.ssh.settings import SshSettings

        return SshSettings(config_file=str(self.lab.config), connect_timeout_s=10)

    def pool(self) -> HostPool:
        from remote_acp.fleet.pool import HostPool

        return HostPool(self.hosts, settings=self.settings(), probe_max_age_s=3600)

    def logins(self) -> int:
        said = [f"Accepted publickey for {u.name} " for u in self.users]
        total = 0
        for host in self.lab.hosts:
            text = (host.root / "sshd.log").read_text(errors="replace")
            total += sum(text.count(s) for s in said)
        return total

    def settle(self) -> None:
        """Wait until no host serves a connection: every session's remote side is gone."""
        deadline = time.monotonic() + SETTLE_S
        while any(h.session_processes() for h in self.lab.hosts) and time.monotonic() < deadline:
            time.sleep(0.05)


# --------------------------------------------------------------------------- the contenders


class Round:
    """Placements started together: each holds its session until every one is placed or failed."""

    def __init__(self, count: int) -> None:
        self.count, self.placed, self.failed = count, 0, 0
        self.everyone = anyio.Event()

    def took(self) -> None:
        self.placed += 1
        self._check()

    def gave_up(self) -> None:
        self.failed += 1
        self._check()

    def _check(self) -> None:
        if self.placed + self.failed == self.count:
            self.everyone.set()


async def place_all(count: int, place: Callable[[int, Round], Coroutine[Any, Any, None]]) -> int:
    """Start ``count`` placements at once; the number that failed."""
    together = Round(count)
    with anyio.fail_after(ROUND_TIMEOUT_S):
        async with anyio.create_task_group() as tg:
            for index in range(count):
                tg.start_soon(place, index, together)
    return together.failed


def by_hand(fleet: Fleet) -> Callable[[int, Round], Coroutine[Any, Any, None]]:
    from remote_acp.errors import Cause, RemoteAcpError
    from remote_acp.fleet.check import host_target
    from remote_acp.options import SessionOptions
    from remote_acp.session.core import open_session

    hosts, settings, options = fleet.hosts, fleet.settings(), SessionOptions(command=fleet.agent)

    async def place(index: int, together: Round) -> None:
        for step in range(len(hosts)):
            host = hosts[(index + step) % len(hosts)]
            try:
                target = host_target(host, settings, take_slot=True)
                async with open_session(fleet.workspace, options, target):
                    together.took()
                    await together.everyone.wait()
                return
            except RemoteAcpError as exc:
                if exc.cause is not Cause.AT_CAPACITY:
                    break
        together.gave_up()

    return place


def with_pool(fleet: Fleet, pool: HostPool) -> Callable[[int, Round], Coroutine[Any, Any, None]]:
    from remote_acp.errors import RemoteAcpError
    from remote_acp.options import SessionOptions

    options = SessionOptions(command=fleet.agent)

    async def place(_: int, together: Round) -> None:
        try:
            async with pool.session(fleet.workspace, options):
                together.took()
                await together.everyone.wait()
        except RemoteAcpError:
            together.gave_up()

    return place


async def measure_round(fleet: Fleet, name: str, sessions: int) -> Sample:
    pool = fleet.pool() if name != BY_HAND else None
    if name == WARM:
        assert pool is not None
        await pool.rank(fleet.agent, fleet.workspace)  # not timed: the pool is warm
    logins, cpu, host_cpu = fleet.logins(), fleet.controller.usage_s(), fleet.on_hosts.usage_s()
    started = time.perf_counter()
    if pool is None:
        failed = await place_all(sessions, by_hand(fleet))
    else:
        failed = await place_all(sessions, with_pool(fleet, pool))
    wall = time.perf_counter() - started
    cpu = fleet.controller.usage_s() - cpu
    await anyio.to_thread.run_sync(fleet.settle)  # the hosts' teardown is theirs: counted once it ended
    return Sample(wall, cpu, fleet.on_hosts.usage_s() - host_cpu, fleet.logins() - logins, failed)


async def measure(fleet: Fleet, args: argparse.Namespace) -> None:
    names = [BY_HAND, WARM, COLD]
    for round_no in range(args.warmup + args.runs):
        for name in names:
            sample = await measure_round(fleet, name, args.sessions)
            label = "warm-up" if round_no < args.warmup else f"round {round_no - args.warmup + 1}"
            print(
                f"{label}: {name}: {fmt_s(sample.wall_s)} wall, {fmt_s(sample.cpu_s)} controller CPU, "
                f"{fmt_s(sample.host_cpu_s)} on the hosts, "
                f"{sample.logins} logins, {sample.failed} failed",
                flush=True,
            )
            if round_no >= args.warmup:
                fleet.samples.setdefault(name, []).append(sample)


# --------------------------------------------------------------------------- report


def report(fleet: Fleet, args: argparse.Namespace, summary: Summary) -> None:
    section(f"placing {args.sessions} sessions at once on {len(fleet.users)} hosts (capacity {args.capacity})")
    base = fleet.samples[BY_HAND]
    base_wall, base_cpu = median([s.wall_s for s in base]), median([s.cpu_s for s in base])
    base_hosts = median([s.host_cpu_s for s in base])
    table = Table(
        "contender",
        "wall",
        "wall / by hand",
        "controller CPU",
        "CPU / by hand",
        "hosts' CPU",
        "/ by hand",
        "logins/session",
        "failed",
    )
    figures: dict[str, tuple[float, float, float]] = {}
    for name, samples in fleet.samples.items():
        wall, cpu = median([s.wall_s for s in samples]), median([s.cpu_s for s in samples])
        hosts = median([s.host_cpu_s for s in samples])
        per_session = median([s.logins / args.sessions for s in samples])
        figures[name] = (wall / base_wall, cpu / base_cpu, per_session)
        table.add(
            name,
            fmt_s(wall),
            f"{wall / base_wall:.2f}x",
            fmt_s(cpu),
            f"{cpu / base_cpu:.2f}x",
            fmt_s(hosts),
            f"{hosts / base_hosts:.2f}x",
            f"{per_session:.2f}",
            str(sum(s.failed for s in samples)),
        )
    table.print()
    print(
        f"medians of {args.runs} rounds; controller CPU: this process and every process it started; "
        "hosts' CPU: the sshd listeners and all they started (control groups)"
    )
    wall_ratio, cpu_ratio, logins = figures[WARM]
    note = f"{args.sessions} sessions, {len(fleet.users)} hosts"
    summary.add(Check("warm pool: logins per placed session", logins, 1.0, "x", note=note))
    summary.add(Check("warm pool wall / hand-written loop", wall_ratio, 1.0, "x", note=note))
    summary.add(Check("warm pool controller CPU / hand-written loop", cpu_ratio, 1.0, "x", note=note))
    failed = sum(s.failed for samples in fleet.samples.values() for s in samples)
    summary.add(Check("placements that failed", failed, 0, "placements"))


# --------------------------------------------------------------------------- the lab


@contextlib.contextmanager
def lab_fleet(root: Path, hosts: int, capacity: int) -> Iterator[Fleet]:
    from integration.sshlab import SshLab
    from integration.users import throwaway_user

    stack_groups = contextlib.ExitStack()
    (root / "lab").mkdir()
    lab = SshLab(root / "lab")
    shared = root / "shared"
    try:
        lab.start(hosts, namespaced=False, max_startups="1000:30:2000")
        groups = stack_groups.enter_context(cpu_groups("controller", "hosts"))
        if groups is None:
            raise RuntimeError("no control group could be made to count CPU time (cgroup v2 or v1 cpuacct)")
        for host in lab.hosts:
            assert host.process is not None
            groups["hosts"].add(host.process.pid)
        groups["controller"].add(os.getpid())
        shared.mkdir()
        for path in (root, shared):
            path.chmod(0o755)
        agent = shared / "scripted-agent"
        agent.write_text(lab_agent_script())
        agent.chmod(0o755)
        workspace = shared / "ws"
        workspace.mkdir()
        workspace.chmod(0o777)
        with contextlib.ExitStack() as stack:
            public = lab.client_key.with_suffix(".pub")
            users = [stack.enter_context(throwaway_user(public, shell="/bin/bash")) for _ in range(hosts)]
            for user in users:  # the sessions' agent slots: one directory per user on the host
                stack.callback(shutil.rmtree, f"{SLOT_DIR_PREFIX}{user.uid}", True)
            yield Fleet(lab, users, str(agent), str(workspace), capacity, groups["controller"], groups["hosts"])
    finally:
        lab.stop()
        stack_groups.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=10, help="hosts in the fleet (default 10)")
    parser.add_argument("--sessions", type=int, default=50, help="sessions placed at once (default 50)")
    parser.add_argument("--capacity", type=int, default=5, help="agent slots per host (default 5)")
    parser.add_argument("--runs", type=int, default=3, help="recorded rounds (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="unrecorded rounds first (default 1)")
    parser.add_argument("--summary-file", help="save the target checks as JSON (used by run_all)")
    args = parser.parse_args()
    if args.sessions > args.hosts * args.capacity:
        parser.error("more sessions than the fleet has slots")
    summary = Summary("placement")
    with benchmark_process(summary, args.summary_file):
        missing = missing_prerequisites()
        if missing:
            print(f"skipped: this benchmark needs {', '.join(missing)}")
            return
        with (
            tempfile.TemporaryDirectory(prefix="ra-bench-placement-") as tmp,
            lab_fleet(Path(tmp), args.hosts, args.capacity) as fleet,
        ):
            print(f"lab: {args.hosts} sshd on 127.0.0.2..., one throwaway user each; agent: {fleet.agent}", flush=True)
            anyio.run(measure, fleet, args)
            report(fleet, args, summary)


if __name__ == "__main__":
    main()
