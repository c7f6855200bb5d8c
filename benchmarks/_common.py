"""Shared machinery of the benchmarks: timed processes, statistics, tables, targets.

The programs they run (the agent, our CLI, the SDK's interpreter, acpx) are :mod:`._programs`'s,
re-exported here.

Nothing here asserts anything: the benchmarks measure and print. Every process a benchmark
starts is accounted for: the benchmark process makes itself a child subreaper (Linux), so any
descendant orphaned by a contender is re-parented to it, and :func:`sweep` reports and kills it.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ._agents import agent_argv, agent_command
from ._proc import children
from ._programs import (
    ACPX_VERSION,
    ANCHORS,
    PY,
    REPO,
    Acpx,
    acpx,
    cli_argv,
    ensure_bytecode,
    sdk_python,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterator, Sequence
    from pathlib import Path

__all__ = [
    "ACPX_VERSION",
    "ANCHORS",
    "PY",
    "REPO",
    "Acpx",
    "Check",
    "Summary",
    "Table",
    "acpx",
    "agent_argv",
    "agent_command",
    "become_subreaper",
    "cli_argv",
    "fmt_ms",
    "fmt_s",
    "median",
    "run_json",
    "run_timed",
    "sdk_python",
    "section",
    "sweep",
]

PR_SET_CHILD_SUBREAPER = 36


# --------------------------------------------------------------------------- processes


def become_subreaper() -> None:
    """Orphaned descendants of our contenders get re-parented to us, so :func:`sweep` sees them."""
    if sys.platform != "linux":
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def sweep() -> list[int]:
    """Reap zombies re-parented to us; SIGKILL and report every live child still there."""
    leftovers: list[int] = []
    for pid, state in children():
        if state != "Z":
            leftovers.append(pid)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, 0)
    return leftovers


@dataclass(slots=True)
class Timed:
    seconds: float
    maxrss_kib: int
    returncode: int
    stdout: bytes


def run_timed(
    argv: Sequence[str],
    *,
    timeout: float = 120.0,
    capture: bool = False,
    env: dict[str, str] | None = None,
    output: Path | None = None,
) -> Timed:
    """Run ``argv`` to completion: wall time from spawn to reap, and the child's peak RSS.

    Its stdout goes to ``output`` (truncated first) when given, else it is captured or dropped.
    The peak RSS comes from ``wait4`` (the child's own, or a reaped descendant's if larger).
    A non-zero exit raises ``RuntimeError`` with the child's stderr.
    """
    if capture and output is not None:
        raise ValueError("capture and output are exclusive")
    with (
        tempfile.TemporaryFile() as err,
        tempfile.TemporaryFile() if output is None else output.open("wb") as out,
    ):
        start = time.perf_counter()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out if capture or output is not None else subprocess.DEVNULL,
            stderr=err,
            env=env,
        )
        try:
            status, usage = _wait4(proc.pid, timeout)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        elapsed = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise RuntimeError(
                f"{shlex.join(argv)} exited {proc.returncode}: {err.read().decode(errors='replace')[-2000:]}"
            )
        if not capture:
            return Timed(elapsed, usage.ru_maxrss, proc.returncode, b"")
        out.seek(0)
        return Timed(elapsed, usage.ru_maxrss, proc.returncode, out.read())


def _wait4(pid: int, timeout: float) -> tuple[int, Any]:
    deadline = time.monotonic() + timeout
    delay = 0.0005
    while True:
        wpid, status, usage = os.wait4(pid, os.WNOHANG)
        if wpid == pid:
            return status, usage
        if time.monotonic() > deadline:
            raise TimeoutError(f"process {pid} did not finish within {timeout:g} s")
        time.sleep(delay)
        delay = min(delay * 2, 0.002)


def run_json(argv: Sequence[str], *, timeout: float = 300.0, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run a helper that prints one JSON object (its last stdout line) and return it."""
    timed = run_timed(argv, timeout=timeout, capture=True, env=env)
    lines = [line for line in timed.stdout.decode().splitlines() if line.strip()]
    if not lines:
        raise RuntimeError(f"{shlex.join(argv)} printed nothing")
    result: dict[str, Any] = json.loads(lines[-1])
    result["_wall_s"] = timed.seconds
    result["_maxrss_kib"] = timed.maxrss_kib
    return result


# --------------------------------------------------------------------------- statistics


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def quantile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def fmt_s(seconds: float) -> str:
    return f"{seconds:.3f} s"


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def fmt_mib(kib: float) -> str:
    return f"{kib / 1024:.1f} MiB"


def fmt_rate(per_s: float) -> str:
    return f"{per_s:,.0f}/s"


def interleaved(
    contenders: dict[str, Callable[[], float]],
    runs: int,
    warmup: int,
    caps: dict[str, int] | None = None,
    cold: Collection[str] = (),
) -> dict[str, list[float]]:
    """Run every contender once per round, after ``warmup`` unrecorded rounds.

    Interleaving spreads the machine's noise over all contenders instead of favouring whoever
    ran in a quiet moment. ``caps`` limits the recorded runs of slow contenders; their runs are
    spread evenly over the rounds, and they warm up once. ``cold`` ones are never warmed up.
    """
    caps = caps or {}
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for round_no in range(warmup):
        for name, fn in contenders.items():
            if name not in cold and (round_no == 0 or caps.get(name, runs) >= runs):
                fn()
    for round_no in range(runs):
        for name, fn in contenders.items():
            cap = min(caps.get(name, runs), runs)
            if (round_no + 1) * cap // runs > round_no * cap // runs:
                samples[name].append(fn())
    return samples


# --------------------------------------------------------------------------- reporting


def section(title: str) -> None:
    print()
    print(f"== {title} ==")


class Table:
    """A plain aligned text table (first column left-aligned, the others right-aligned)."""

    def __init__(self, *headers: str) -> None:
        self.headers = headers
        self.rows: list[tuple[str, ...]] = []

    def add(self, *cells: str) -> None:
        self.rows.append(tuple(cells) + ("",) * (len(self.headers) - len(cells)))

    def print(self) -> None:
        widths = [max(len(row[i]) for row in [self.headers, *self.rows]) for i in range(len(self.headers))]

        def line(cells: tuple[str, ...]) -> str:
            parts = [cells[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
            return "  ".join(parts).rstrip()

        print(line(self.headers))
        print("  ".join("-" * w for w in widths))
        for row in self.rows:
            print(line(row))


@dataclass(slots=True)
class Check:
    """One DESIGN §5 target: the measured figure against its bound."""

    figure: str
    measured: float
    target: float
    unit: str
    higher_is_better: bool = False
    note: str = ""

    @property
    def passed(self) -> bool:
        return self.measured >= self.target if self.higher_is_better else self.measured <= self.target

    @property
    def ratio(self) -> float:
        """measured / target: <= 1 passes for a bound on time or memory, >= 1 for a rate."""
        return self.measured / self.target if self.target else float("nan")

    def describe(self) -> str:
        op = ">=" if self.higher_is_better else "<="
        verdict = "PASS" if self.passed else "MISS"
        text = (
            f"{verdict}  {self.figure}: {_fmt_unit(self.measured, self.unit)} "
            f"(target {op} {_fmt_unit(self.target, self.unit)}; measured/target {self.ratio:.2f})"
        )
        return text + (f"  [{self.note}]" if self.note else "")


def _fmt_unit(value: float, unit: str) -> str:
    if unit == "s":
        return fmt_s(value)
    if unit == "ms":
        return f"{value:.1f} ms"
    if unit == "MiB":
        return f"{value:.1f} MiB"
    if unit == "/s":
        return fmt_rate(value)
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "%":
        return f"{value:.0%}"
    return f"{value:g} {unit}"


@dataclass(slots=True)
class Summary:
    """The checks of one benchmark run, printed at its end and optionally saved for run_all."""

    name: str
    checks: list[Check] = field(default_factory=list)
    leftovers: list[int] = field(default_factory=list)

    def add(self, check: Check) -> None:
        self.checks.append(check)

    def print(self) -> None:
        section(f"{self.name}: targets")
        for check in self.checks:
            print(check.describe())
        print(f"leftover processes after this benchmark: {len(self.leftovers)} {self.leftovers or ''}".rstrip())

    def save(self, path: str | None) -> None:
        if not path:
            return
        payload = {"name": self.name, "checks": [asdict(c) for c in self.checks], "leftovers": self.leftovers}
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(payload, fh)

    @staticmethod
    def load(path: str) -> Summary:
        with open(path, encoding="utf-8") as fh:
            payload = json.load(fh)
        return Summary(payload["name"], [Check(**c) for c in payload["checks"]], list(payload.get("leftovers", [])))


def environment_note() -> str:
    """One line describing where the numbers come from."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return (
        f"python {sys.version.split()[0]} ({PY}); {os.cpu_count()} CPUs; "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )


def _terminated(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def benchmark_process(summary: Summary, summary_file: str | None) -> Iterator[None]:
    """Subreaper on entry; on exit sweep leftovers, print and save the summary. A SIGTERM
    unwinds like an interrupt, so the labs, throwaway users and agents go with the run."""
    become_subreaper()
    signal.signal(signal.SIGTERM, _terminated)
    # The library's expected warnings (e.g. a force-terminated stubborn agent) would interleave
    # with the tables; a handler that drops them keeps logging's last-resort printer quiet.
    logging.getLogger("remote_acp").addHandler(logging.NullHandler())
    print(environment_note())
    print(ensure_bytecode(), flush=True)
    try:
        yield
    finally:
        from remote_acp import close_launcher

        close_launcher()  # the in-process sessions' launcher: ours, not a leftover
        summary.leftovers = sweep()
        summary.print()
        summary.save(summary_file)
