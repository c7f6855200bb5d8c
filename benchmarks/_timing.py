"""Timing the contenders: a process from spawn to reap (with its peak RSS), a helper's JSON
answer, interleaved rounds, and the statistics the tables print (median, quantile).
"""

from __future__ import annotations

import json
import os
import shlex
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Sequence
    from pathlib import Path

__all__ = ["Timed", "interleaved", "median", "quantile", "run_json", "run_timed"]


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


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def quantile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
