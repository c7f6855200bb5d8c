"""The reattach window over ssh: what it costs a session nothing disturbs, and how fast a lost link comes back.

    python -m benchmarks.reattach [--runs 7] [--warmup 1] [--chunks 100000] [--cuts 3]

One real OpenSSH server on loopback (``integration.sshlab``, as ``ssh_overhead.py``; needs root and
``/usr/sbin/sshd``), and, for the cuts, one more in a network namespace whose link is cut (needs
``ip``). The agent is the scriptable agent every benchmark drives. In each round, interleaved:

- ``ssh lab1 true`` and the first line of ``ssh -T lab1 'echo ready'``: the floor of any
  reconnect (a new ssh login);
- the same session twice, window off and window on (``SshSettings(reattach_window_s=...)``): its
  start (to the ``async with`` body), a one-chunk turn, a turn of ``--chunks`` chunks (time per
  chunk, chunks per second) and its close;
- a windowed session whose local ``ssh`` is SIGKILLed mid-stream (a turn dripping a chunk every
  20 ms): the time to ``link_lost``, the reconnect (``link_lost`` to ``link_restored``, and the
  event's ``down_ms``), ``link_restored`` to the first event after it (the first chunk written
  while the link was down), and the whole outage as the caller sees it, from the kill (the
  network never left, so the link could be back at once) to that first replayed event.

Then ``--cuts`` windowed sessions on the namespaced host, each cut as its turn streams and restored
a set time after ``link_lost`` (``--cut-holds``): the first replayed event is timed from the
link being back. The cuts need ssh to notice a dead link, so their sessions use keepalives of 1 s
(2 missed) and a connect timeout of ``--cut-connect-timeout`` (the defaults are 15 s x 3 and 10 s).

The bulk turn's CPU time is counted by control group (:mod:`benchmarks._cpu_groups`): here (this
process, its supervisors and ``ssh`` clients) and on the host (the sshd listeners and all they
fork: logins, the agent, the relay). At the end every windowed session's relay must be gone (a
closed session ends its relay), and every process marked as ``ssh_overhead.py`` marks them.

Targets (DESIGN section 5): the window costs <= 5% on session start and on per-chunk cost, side by
side with the window off; the first replayed event comes <= 0.5 s after the link is back.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Final

import anyio

from remote_acp.options import SessionOptions
from remote_acp.targets.ssh.relink import MAX_ATTEMPTS, next_attempt_in
from remote_acp.targets.ssh.settings import SshSettings
from remote_acp.targets.ssh.target import SshTarget

from ._agents import agent_argv, agent_command
from ._cpu_groups import cpu_groups
from ._harness import benchmark_process, environment_note
from ._reattach_turns import Outage, cut_turn, end_relays, killed_turn, undisturbed
from ._report import Check, Summary, Table, fmt_ms, fmt_rate, fmt_s, section
from ._timing import interleaved, median, quantile, run_timed
from .ssh_overhead import first_line

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from integration.sshlab import SshLab

    from ._cpu_groups import CpuGroup

HOST: Final = "lab1"
SSHD: Final = "/usr/sbin/sshd"
WINDOW_S: Final = 120
DRIP_MS: Final = 20
KILL_AT: Final = 10
"""The chunk whose arrival triggers the kill or the cut (0.2 s into the turn)."""
KILL_TAIL: Final = 40
"""Chunks the agent writes after the kill: 0.8 s, longer than a reconnect here."""
CUT_TAIL: Final = 100
"""Chunks after the cut: 2 s, all written before ssh notices the cut (all replayed)."""
REMOTE_SETTLE_S: Final = 6.0

START_RATIO_TARGET: Final = 1.05
CHUNK_RATIO_TARGET: Final = 1.05
REPLAY_TARGET_S: Final = 0.5
TEARDOWN_TARGET_S: Final = 0.05
"""DESIGN section 5's teardown of a cooperative agent, for orientation (teardown_memory.py checks it)."""

SSH_TRUE = "ssh lab1 true (whole process)"
LINE_PLAIN = "first line of `echo ready` over ssh -T (a login's floor)"
OFF, ON = "window off", "window on"
KILL = "killed ssh"
START, ONE, BULK, CLOSE = "start", "one-chunk turn", "bulk turn", "close"
CPU_HERE, CPU_HOSTS = "bulk turn CPU here", "bulk turn CPU on the host"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7, help="recorded rounds, one killed ssh each (default 7)")
    parser.add_argument("--warmup", type=int, default=1, help="unrecorded rounds first (default 1)")
    parser.add_argument("--chunks", type=int, default=100_000, help="chunks of the bulk turn (default 100000)")
    parser.add_argument("--cuts", type=int, default=3, help="cut links, on the namespaced host (default 3; 0: none)")
    parser.add_argument(
        "--cut-holds",
        default="0.5,1.5,2.5",
        help="seconds the link stays cut after link_lost, taken in turn by the cuts (default 0.5,1.5,2.5)",
    )
    parser.add_argument("--cut-connect-timeout", type=int, default=3, help="the cut sessions' connect timeout (s)")
    parser.add_argument("--summary-file", help="save the target checks as JSON (used by run_all)")
    args = parser.parse_args()
    holds = [float(word) for word in args.cut_holds.split(",") if word.strip()]

    summary = Summary("reattach window")
    with benchmark_process(summary, args.summary_file):
        missing = [
            why
            for why, bad in (
                ("root (the lab's sshd)", os.geteuid() != 0),
                (SSHD, not os.path.exists(SSHD)),
                ("ssh on PATH", shutil.which("ssh") is None),
            )
            if bad
        ]
        if missing:
            print(f"skipped: this benchmark needs {', '.join(missing)}")
            return
        if args.cuts and shutil.which("ip") is None:
            print("no `ip` (iproute2): the cut links are skipped")
            args.cuts = 0
        with_lab(args, holds or [1.0], summary)


def with_lab(args: argparse.Namespace, holds: list[float], summary: Summary) -> None:
    from integration.sshlab import SshLab
    from tests.support.orphans import MARKER_NAME, kill_marked

    marker = f"bench-reattach-{os.getpid()}"
    # Every process started from here on carries the marker, and the lab's ssh_config sends it
    # to the remote side: a relay or agent outliving its session is found wherever it runs.
    os.environ[MARKER_NAME] = marker
    relay_ids: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ra-bench-reattach-") as root:
        lab = SshLab(Path(root))
        try:
            lab.start(1, namespaced=args.cuts > 0)
            with cpu_groups("controller", "hosts") as groups:
                measure(args, summary, lab, relay_ids, cpu_reader(groups, lab))
                if args.cuts:
                    cuts(args, holds, summary, lab, relay_ids)
        finally:
            try:
                relays = end_relays(relay_ids, within=REMOTE_SETTLE_S)
                left = kill_marked(marker, settle_s=REMOTE_SETTLE_S)
                print(
                    f"relays of the {len(relay_ids)} windowed sessions still running {REMOTE_SETTLE_S:g} s after "
                    f"their close: {len(relays)} {relays or ''}".rstrip()
                )
                print(f"remote processes left after the sessions (marked, after {REMOTE_SETTLE_S:g} s): {len(left)}")
                for line in left:
                    print(f"  {line}")
            finally:
                lab.stop()
                del os.environ[MARKER_NAME]


def cpu_reader(groups: dict[str, CpuGroup] | None, lab: SshLab) -> Callable[[], tuple[float, float]] | None:
    """CPU seconds so far here and on the hosts: the sshd listeners join one control group (every
    login, agent and relay forked under them stays there), this process the other."""
    if groups is None:
        print("no control group could be made: the CPU time of the turns is not counted")
        return None
    here, hosts = groups["controller"], groups["hosts"]
    for host in lab.hosts:
        assert host.process is not None
        hosts.add(host.process.pid)
    here.add(os.getpid())
    return lambda: (here.usage_s(), hosts.usage_s())


def measure(
    args: argparse.Namespace,
    summary: Summary,
    lab: SshLab,
    relay_ids: list[str],
    cpu: Callable[[], tuple[float, float]] | None,
) -> None:
    ssh = shutil.which("ssh") or "ssh"
    cfg = str(lab.config)
    off = SshTarget(HOST, SshSettings(config_file=cfg))
    on = SshTarget(HOST, SshSettings(config_file=cfg, reattach_window_s=WINDOW_S))
    options = SessionOptions(command=agent_argv())
    side: dict[str, list[float]] = {}
    outages: list[Outage] = []

    def note(name: str, value: float) -> None:
        side.setdefault(name, []).append(value)

    def session(label: str, target: SshTarget) -> Callable[[], float]:
        def run() -> float:
            figures = anyio.run(undisturbed, target, options, args.chunks, relay_ids, cpu)
            note(f"{label}: {ONE}", figures.one_chunk_s)
            note(f"{label}: {BULK}", figures.bulk_s)
            note(f"{label}: {CLOSE}", figures.close_s)
            note(f"{label}: {CPU_HERE}", figures.bulk_cpu[0])
            note(f"{label}: {CPU_HOSTS}", figures.bulk_cpu[1])
            return figures.start_s

        return run

    def killed() -> float:
        outage = anyio.run(_killed, on, options, relay_ids)
        outages.append(outage)
        return outage.back_to_first_s

    contenders: dict[str, Callable[[], float]] = {
        SSH_TRUE: lambda: run_timed([ssh, "-F", cfg, HOST, "true"]).seconds,
        LINE_PLAIN: lambda: first_line([ssh, "-F", cfg, "-T", HOST, "echo ready"]),
        f"{OFF}: {START}": session(OFF, off),
        f"{ON}: {START}": session(ON, on),
        KILL: killed,
    }
    section(f"reattach window: one loopback sshd, {args.runs} rounds after {args.warmup} warm-up")
    print(f"host:   {HOST} = {lab.host(HOST).address}:{lab.host(HOST).port}, ssh_config {cfg}")
    print(f"agent:  {agent_command()} (on the remote side); window on: reattach_window_s={WINDOW_S}")
    print(f"ssh:    {subprocess.run([ssh, '-V'], capture_output=True, text=True).stderr.strip()}")
    samples = interleaved(contenders, args.runs, args.warmup)
    # The side figures were noted in the warm-up rounds too: keep those of the recorded rounds.
    samples.update({name: values[-args.runs :] for name, values in side.items()})
    recorded = outages[-args.runs :]
    print(f"after the rounds: {environment_note()}")
    overhead(args, summary, samples)
    reconnects(summary, samples, recorded)


async def _killed(target: SshTarget, options: SessionOptions, seen: list[str]) -> Outage:
    return await killed_turn(target, options, seen, chunks=KILL_AT + KILL_TAIL, every_ms=DRIP_MS, at=KILL_AT)


def _ratio_row(
    table: Table, name: str, off: Sequence[float], on: Sequence[float], fmt: Callable[[float], str], target: str = ""
) -> float:
    """One figure off and on: medians, the ratio of medians, the median of each round's ratio."""
    ratio = median(on) / median(off)
    paired = median([b / a for a, b in zip(off, on, strict=True)])
    diff = median(on) - median(off)
    sign = "+" if diff >= 0 else "-"
    table.add(
        name, fmt(median(off)), fmt(median(on)), f"{ratio:.3f}", f"{paired:.3f}", f"{sign}{fmt(abs(diff))}", target
    )
    return ratio


def overhead(args: argparse.Namespace, summary: Summary, samples: dict[str, list[float]]) -> None:
    section(f"the window on an undisturbed session: medians of {args.runs} rounds, window off and on side by side")
    n = args.chunks

    def per_chunk(values: list[float]) -> list[float]:
        return [v / n for v in values]

    def us(seconds: float) -> str:
        return f"{seconds * 1e6:.2f} us"

    table = Table("figure", OFF, ON, "on / off", "per round", "on - off", "target")
    start = _ratio_row(
        table,
        "session start (to the async with body)",
        samples[f"{OFF}: {START}"],
        samples[f"{ON}: {START}"],
        fmt_s,
        f"<= {START_RATIO_TARGET:.2f}x",
    )
    _ratio_row(
        table, "one-chunk turn (prompt to end of turn)", samples[f"{OFF}: {ONE}"], samples[f"{ON}: {ONE}"], fmt_ms
    )
    chunk = _ratio_row(
        table,
        f"{n:,}-chunk turn: time per chunk",
        per_chunk(samples[f"{OFF}: {BULK}"]),
        per_chunk(samples[f"{ON}: {BULK}"]),
        us,
        f"<= {CHUNK_RATIO_TARGET:.2f}x",
    )
    _ratio_row(table, f"{n:,}-chunk turn: whole turn", samples[f"{OFF}: {BULK}"], samples[f"{ON}: {BULK}"], fmt_s)
    _ratio_row(
        table,
        "close (teardown)",
        samples[f"{OFF}: {CLOSE}"],
        samples[f"{ON}: {CLOSE}"],
        fmt_ms,
        f"<= {fmt_ms(TEARDOWN_TARGET_S)}",
    )
    for name, what in ((CPU_HERE, "here (controller, ssh)"), (CPU_HOSTS, "on the host (sshd, agent, relay)")):
        off, on = samples[f"{OFF}: {name}"], samples[f"{ON}: {name}"]
        if not any(math.isnan(v) for v in off + on):
            _ratio_row(table, f"{n:,}-chunk turn: CPU {what}", off, on, fmt_s)
    table.print()
    rate_off, rate_on = n / median(samples[f"{OFF}: {BULK}"]), n / median(samples[f"{ON}: {BULK}"])
    print(
        f"chunks per second: window off {fmt_rate(rate_off)}, on {fmt_rate(rate_on)} "
        f"(on / off {rate_on / rate_off:.3f})"
    )
    print("on / off: ratio of the medians; per round: the median of each round's on / off (the two ran back to back).")
    spread = Table("spread", "min off", "min on", "p90 off", "p90 on")
    for name, fmt in ((START, fmt_s), (ONE, fmt_ms), (BULK, fmt_s), (CLOSE, fmt_ms)):
        a, b = samples[f"{OFF}: {name}"], samples[f"{ON}: {name}"]
        spread.add(name, fmt(min(a)), fmt(min(b)), fmt(quantile(a, 0.9)), fmt(quantile(b, 0.9)))
    spread.print()
    summary.add(
        Check(
            "reattach window on: session start over ssh / window off (medians)",
            start,
            START_RATIO_TARGET,
            "x",
            note=f"off {fmt_s(median(samples[f'{OFF}: {START}']))}, on {fmt_s(median(samples[f'{ON}: {START}']))}",
        )
    )
    summary.add(
        Check(
            f"reattach window on: time per chunk of a {n:,}-chunk turn / window off (medians)",
            chunk,
            CHUNK_RATIO_TARGET,
            "x",
            note=f"{fmt_rate(rate_off)} off, {fmt_rate(rate_on)} on",
        )
    )


def _stats_row(table: Table, name: str, values: Sequence[float], fmt: Callable[[float], str], target: str = "") -> None:
    table.add(name, fmt(median(values)), fmt(min(values)), fmt(quantile(values, 0.9)), str(len(values)), target)


def reconnects(summary: Summary, samples: dict[str, list[float]], outages: list[Outage]) -> None:
    section(f"a killed local ssh mid-stream (a chunk every {DRIP_MS} ms), {len(outages)} times")
    target = f"<= {fmt_s(REPLAY_TARGET_S)}"
    table = Table("figure", "median", "min", "p90", "n", "target")
    _stats_row(table, "kill -> link_lost", [o.detect_s for o in outages], fmt_ms)
    _stats_row(table, "link_lost -> link_restored (the reconnect)", [o.reconnect_s for o in outages], fmt_ms)
    _stats_row(table, "  down_ms, as link_restored says", [o.down_ms / 1000 for o in outages], fmt_ms)
    _stats_row(table, "link_restored -> first replayed event", [o.restored_to_first_s for o in outages], fmt_ms, target)
    _stats_row(
        table, "kill -> first replayed event (link back at once)", [o.back_to_first_s for o in outages], fmt_ms, target
    )
    _stats_row(table, "backlog replayed in one burst: time", [o.backlog_s for o in outages], fmt_ms)
    table.add("backlog replayed in one burst: chunks", f"{median([o.backlog for o in outages]):.0f}")
    _stats_row(table, SSH_TRUE, samples[SSH_TRUE], fmt_ms)
    _stats_row(table, LINE_PLAIN, samples[LINE_PLAIN], fmt_ms)
    table.print()
    reconnect, line = median([o.reconnect_s for o in outages]), median(samples[LINE_PLAIN])
    print(
        f"the reconnect beyond a bare login's first line: {fmt_ms(reconnect - line)} (medians: the attach login, "
        f"its marker and go-ahead, the relay's header); the first attempt starts at once, "
        f"a second only {next_attempt_in(0):g} s later if it has not got through"
    )
    first = median([o.restored_to_first_s for o in outages])
    outage = median([o.back_to_first_s for o in outages])
    summary.add(Check("killed ssh: link_restored -> first replayed event (median)", first, REPLAY_TARGET_S, "s"))
    summary.add(
        Check(
            "killed ssh: kill -> first replayed event, the link back at once (median)",
            outage,
            REPLAY_TARGET_S,
            "s",
            note=f"reconnect {fmt_ms(reconnect)}, a login's first line {fmt_ms(line)}",
        )
    )


def cuts(args: argparse.Namespace, holds: list[float], summary: Summary, lab: SshLab, relay_ids: list[str]) -> None:
    host = lab.namespaced
    settings = SshSettings(
        config_file=str(lab.config),
        reattach_window_s=WINDOW_S,
        server_alive_interval_s=1,
        server_alive_count_max=2,
        connect_timeout_s=args.cut_connect_timeout,
    )
    target = SshTarget(host.alias, settings)
    options = SessionOptions(command=agent_argv())
    section(
        f"a cut network link ({host.alias}, in a network namespace), {args.cuts} times: keepalive 1 s x 2, "
        f"connect timeout {args.cut_connect_timeout} s"
    )

    async def one(hold: float) -> Outage:
        return await cut_turn(
            target, options, relay_ids, host, chunks=KILL_AT + CUT_TAIL, every_ms=DRIP_MS, at=KILL_AT, hold_s=hold
        )

    outages = [anyio.run(one, holds[index % len(holds)]) for index in range(args.cuts)]
    table = Table(
        "cut held after link_lost",
        "cut -> link_lost",
        "down_ms",
        "link back -> link_restored",
        "link_restored -> first",
        "link back -> first replayed",
    )
    for o in outages:
        table.add(
            fmt_s(o.hold_s),
            fmt_s(o.detect_s),
            fmt_s(o.down_ms / 1000),
            fmt_s(o.back_to_restored_s),
            fmt_ms(o.restored_to_first_s),
            fmt_s(o.back_to_first_s),
        )
    back = median([o.back_to_first_s for o in outages])
    table.add(
        "median",
        fmt_s(median([o.detect_s for o in outages])),
        fmt_s(median([o.down_ms / 1000 for o in outages])),
        fmt_s(median([o.back_to_restored_s for o in outages])),
        fmt_ms(median([o.restored_to_first_s for o in outages])),
        fmt_s(back),
    )
    table.print()
    print(f"target: the first replayed event <= {fmt_s(REPLAY_TARGET_S)} after the link is back")
    print(
        f"reconnect attempts: the first at once after link_lost, the next {next_attempt_in(0):g} s later, "
        f"then one every {next_attempt_in(1):g} s (the first 10 s), overlapping, at most {MAX_ATTEMPTS} "
        f"in flight; each ssh gives up a connect after its ConnectTimeout ({args.cut_connect_timeout} s here)"
    )
    print(f"after the cuts: {environment_note()}")
    summary.add(
        Check(
            "cut link: link back -> first replayed event (median)",
            back,
            REPLAY_TARGET_S,
            "s",
            note=f"holds {', '.join(f'{o.hold_s:g}' for o in outages)} s, connect timeout {args.cut_connect_timeout} s",
        )
    )


if __name__ == "__main__":
    main()
