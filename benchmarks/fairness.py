"""Fairness: does one flooding agent starve the other tasks of the process that drives it?

    python -m benchmarks.fairness [--chunks 100000] [--runs 3] [--period-ms 5] [--backends asyncio,trio]

In one process and one event loop: a session runs one turn of the scriptable agent streaming
``--chunks`` one-character chunks as fast as it can (``@bulk=N``) while another task loops on
``anyio.sleep(period)`` and stamps each wake-up. The figure is the worst gap between two wake-ups
that overlap the turn: with a fair reader it stays near the period; a reader that never yields
holds the loop for the whole turn. Each backend also runs the same sleeper next to an idle
session for as long as the flood took, to show the machine's own noise.

The target: worst gap <= 50 ms, the largest over every run. On a loaded machine a
descheduling of the whole process shows up there too: the idle row says how large the machine's
own gaps were, and the median over the runs of each run's worst gap is printed beside it.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from typing import TYPE_CHECKING

import anyio

from ._agents import agent_argv, bulk_prompt
from ._harness import benchmark_process
from ._programs import REPO
from ._report import Check, Summary, Table, fmt_ms, fmt_rate, fmt_s, section
from ._timing import median, quantile

if TYPE_CHECKING:
    from remote_acp.events import Event

TARGET_GAP_MS = 50.0


class Sleeper:
    """Wakes every ``period`` seconds and keeps the time of each wake-up."""

    def __init__(self, period: float) -> None:
        self.period = period
        self.stamps: list[float] = []

    async def run(self) -> None:
        self.stamps.append(time.perf_counter())
        while True:
            await anyio.sleep(self.period)
            self.stamps.append(time.perf_counter())

    def gaps(self, start: float, end: float) -> list[float]:
        """Gaps between consecutive wake-ups whose interval overlaps ``[start, end]``."""
        s = self.stamps
        return [b - a for a, b in zip(s, s[1:], strict=False) if b >= start and a <= end]


async def one_run(chunks: int, period: float, idle_s: float | None) -> tuple[list[float], float]:
    """The gaps of the sleeper during one flooding turn (or ``idle_s`` of an idle session), and its time."""
    from remote_acp.options import SessionOptions
    from remote_acp.session.core import open_session

    deltas = 0

    def count(event: Event) -> None:
        nonlocal deltas
        if getattr(event, "delta", None) is not None:
            deltas += 1

    sleeper = Sleeper(period)
    async with open_session(str(REPO), SessionOptions(command=agent_argv())) as session:
        async with anyio.create_task_group() as tg:
            tg.start_soon(sleeper.run)
            await anyio.sleep(period * 4)  # the sleeper is in its loop
            start = time.perf_counter()
            if idle_s is None:
                result = await session.run_turn(bulk_prompt(chunks), count)
            else:
                await anyio.sleep(idle_s)
            end = time.perf_counter()
            await anyio.sleep(period * 2)  # a wake-up after the end closes the last gap
            tg.cancel_scope.cancel()
    if idle_s is None and (result.outcome != "turn_completed" or deltas != chunks):
        raise RuntimeError(f"turn ended {result.outcome} after {deltas} of {chunks} chunks")
    return sleeper.gaps(start, end), end - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=100_000, help="chunks in the flooding turn (default 100000)")
    parser.add_argument("--runs", type=int, default=3, help="flooding turns per backend (default 3)")
    parser.add_argument("--period-ms", type=float, default=5.0, help="the sleeper's period (default 5 ms)")
    parser.add_argument("--backends", default="asyncio,trio", help="anyio backends (trio only when installed)")
    parser.add_argument("--summary-file", help="save the target checks as JSON (used by run_all)")
    args = parser.parse_args()
    summary = Summary("fairness")
    with benchmark_process(summary, args.summary_file):
        measure(args, summary)


def measure(args: argparse.Namespace, summary: Summary) -> None:
    period = args.period_ms / 1000
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    section(
        f"fairness: a task sleeping {args.period_ms:g} ms beside a {args.chunks:,}-chunk turn, "
        f"{args.runs} runs per backend"
    )
    table = Table(
        "backend / load", "worst gap (max)", "worst gap (median of runs)", "p99 gap", "wake-ups", "turn", "rate"
    )
    for backend in backends:
        if backend == "trio" and importlib.util.find_spec("trio") is None:
            print("trio: not installed, skipped")
            continue
        worst: list[float] = []
        every: list[float] = []
        wakeups: list[int] = []
        turns: list[float] = []
        for _ in range(args.runs):
            gaps, took = anyio.run(one_run, args.chunks, period, None, backend=backend)
            worst.append(max(gaps))
            every.extend(gaps)
            wakeups.append(len(gaps))
            turns.append(took)
        idle_gaps, _ = anyio.run(one_run, args.chunks, period, median(turns), backend=backend)
        turn = median(turns)
        table.add(
            f"{backend}, flooding turn",
            fmt_ms(max(worst)),
            fmt_ms(median(worst)),
            fmt_ms(quantile(every, 0.99)),
            f"{median(wakeups):.0f} (ideal {turn / period:.0f})",
            fmt_s(turn),
            fmt_rate(args.chunks / turn),
        )
        table.add(
            f"{backend}, idle session (noise)",
            fmt_ms(max(idle_gaps)),
            "",
            fmt_ms(quantile(idle_gaps, 0.99)),
            f"{len(idle_gaps)}",
            fmt_s(turn),
        )
        summary.add(
            Check(
                f"worst gap of a {args.period_ms:g} ms sleeper during a {args.chunks:,}-chunk turn ({backend})",
                max(worst) * 1000,
                TARGET_GAP_MS,
                "ms",
                note=f"median of runs {fmt_ms(median(worst))}; idle session {fmt_ms(max(idle_gaps))}",
            )
        )
    table.print()
    print("gap: time between two wake-ups of the sleeper that overlap the turn (ideal: the period).")
    print("wake-ups: how many the sleeper had during the turn (ideal: turn time / period).")


if __name__ == "__main__":
    main()
