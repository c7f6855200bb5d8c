"""Run every benchmark, each in its own fresh process, then print every target.

    python -m benchmarks.run_all [--quick] [--profile] [NAME ...]

NAME is one of ``session_overhead``, ``throughput``, ``cli_throughput``, ``fairness``,
``teardown_memory``, ``ssh_overhead``, ``reattach`` (default: all; ``ssh_overhead`` and
``reattach`` need root and ``/usr/sbin/sshd`` and otherwise say they skipped; ``reattach`` cuts a
namespaced host's link only where ``ip`` is found). ``--quick`` lowers the repetition counts (a
smoke run, noisier medians); ``--profile`` adds the cProfile of one of our turns to the throughput
benchmark. The exit status is 0 whether targets
pass or miss (these are measurements, not tests); it is 1 only when a benchmark itself failed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ._harness import environment_note
from ._programs import PY, REPO
from ._report import Summary, section

BENCHMARKS: dict[str, tuple[list[str], list[str]]] = {
    "session_overhead": ([], ["--runs", "5", "--warmup", "1", "--sdk-runs", "3"]),
    "throughput": ([], ["--runs", "3", "--sdk-runs", "1", "--raw-runs", "2"]),
    "cli_throughput": ([], ["--runs", "2", "--warmup", "0", "--json-runs", "1"]),
    "fairness": ([], ["--runs", "1", "--backends", "asyncio"]),
    "teardown_memory": (
        [],
        ["--runs", "5", "--stubborn-runs", "2", "--anchor-runs", "1", "--memory-runs", "1", "--no-sdk-stubborn"],
    ),
    "ssh_overhead": ([], ["--runs", "3", "--warmup", "1", "--supervised-exit-runs", "1"]),
    "reattach": ([], ["--runs", "3", "--warmup", "1", "--chunks", "20000", "--cuts", "1"]),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"one of {', '.join(BENCHMARKS)} (default: all)")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run)")
    parser.add_argument("--profile", action="store_true", help="cProfile one of our turns in throughput")
    args = parser.parse_args()
    names = args.names or list(BENCHMARKS)
    unknown = [name for name in names if name not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")

    started = time.perf_counter()
    print(f"benchmarks: {', '.join(names)}")
    print(environment_note())
    summaries: list[Summary] = []
    failed: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            normal, quick = BENCHMARKS[name]
            extra = list(quick if args.quick else normal)
            if args.profile and name == "throughput":
                extra.append("--profile")
            summary_file = Path(tmp) / f"{name}.json"
            argv = [PY, "-m", f"benchmarks.{name}", "--summary-file", str(summary_file), *extra]
            print(f"\n######## {name} ({' '.join(extra) or 'default counts'})", flush=True)
            code = subprocess.run(argv, cwd=REPO, check=False).returncode
            if code != 0 or not summary_file.exists():
                failed.append(f"{name} (exit status {code})")
                continue
            summaries.append(Summary.load(str(summary_file)))

    section("all targets, medians measured in this run")
    for summary in summaries:
        for check in summary.checks:
            print(check.describe())
    leftovers = sum(len(s.leftovers) for s in summaries)
    missed = sum(not c.passed for s in summaries for c in s.checks)
    total = sum(len(s.checks) for s in summaries)
    print(f"{total - missed}/{total} targets met; leftover processes: {leftovers}")
    for name in failed:
        print(f"FAILED to run: {name}")
    print(f"total time {time.perf_counter() - started:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
