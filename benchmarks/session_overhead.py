"""Whole-process cost of a one-chunk local session, ours against the anchors, side by side.

    python -m benchmarks.session_overhead [--runs 15] [--warmup 2] [--sdk-runs 7] [--no-acpx]

Every contender drives the same agent (the scriptable agent, run by this interpreter) through
the same session: start the agent, ``initialize``, ``session/new``, one turn whose reply is one
chunk (``hi``), teardown. Each is timed from spawn to reap, as a user running it would see it.
Contenders run interleaved (one of each per round) so the machine's noise hits all of them.

The anchors: the official SDK's client, a raw stdlib client, and acpx (the Node command line,
pinned by ``scripts/install-acpx.sh``, installed on first use) running ``exec`` (one-shot, no saved
session) with the same agent as ``--agent``.

Also measured: ``remote-acp --version``, ``acpx --version``, the import time of ``remote_acp``
(and of what ``run`` needs), the official SDK's import, the interpreter's own start, and the
agent alone.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from typing import TYPE_CHECKING

from ._agents import agent_argv, agent_command
from ._harness import benchmark_process
from ._programs import ANCHORS, PY, REPO, acpx, cli_argv, sdk_python
from ._report import Check, Summary, Table, fmt_mib, fmt_s, section
from ._timing import interleaved, median, quantile, run_timed

if TYPE_CHECKING:
    from collections.abc import Callable

# Everything a `remote-acp run` process imports (including lazy imports inside `run`).
CLI_RUN_IMPORTS = (
    "remote_acp.cli.main, remote_acp.cli.logging_setup, remote_acp.options, remote_acp.cli.run, "
    "remote_acp.cli.render, anyio._backends._asyncio"
)
# The library's modules that do not touch pydantic, with anyio's asyncio backend.
NO_PYDANTIC_IMPORTS = (
    "remote_acp.session.connection, remote_acp.protocol.normalize, remote_acp.session.turn, remote_acp.targets.launch, "
    "remote_acp.events, remote_acp.logs, anyio._backends._asyncio"
)
PYDANTIC_MODEL = "pydantic\nclass M(pydantic.BaseModel):\n    x: int"

I_CLI = "import the CLI run path (cli.main, options, cli.run, asyncio backend)"
W_CLI = "python -c 'import <the CLI run path>' (whole process)"
I_PYDANTIC = "import pydantic + define one model"
I_NO_PYDANTIC = "import the library modules without pydantic (+ asyncio backend)"

RUN_TARGET_S = 0.30
VERSION_TARGET_S = 0.20
ACPX_RATIO_TARGET = 0.67
"""remote-acp run at most this fraction of acpx's time: faster than the fastest peer by a third."""
RAW_EXTRA_TARGET_S = 0.08
"""remote-acp run at most this much slower than the raw stdlib client."""
PROMPT = "hi"

# DESIGN section 5, measured when the targets were set (for orientation only; the ratios below
# use the anchors measured in this run).
DESIGN_REF = {
    "SDK client (whole process)": 1.64,
    "raw stdlib client (whole process)": 0.19,
    "import acp (SDK)": 1.56,
}


def agent_alone() -> float:
    """Spawn the agent, one ``initialize`` round trip, close stdin, wait for its exit."""
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}).encode()
    start = time.perf_counter()
    proc = subprocess.Popen(agent_argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(line + b"\n")
        proc.stdin.flush()
        if b'"result"' not in proc.stdout.readline():
            raise RuntimeError("the agent did not answer initialize")
        proc.stdin.close()
        proc.wait(timeout=30)
        elapsed = time.perf_counter() - start
        proc.stdout.close()
        return elapsed
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def import_time(python: str, module: str) -> float:
    """Seconds to import ``module`` in a fresh interpreter (its start not included)."""
    code = f"import time; t = time.perf_counter()\nimport {module}\nprint(time.perf_counter() - t)"
    return float(run_timed([python, "-c", code], capture=True).stdout.decode().strip())


def side_by_side(samples: dict[str, list[float]], ours_name: str, raw: str, node_run: str | None) -> None:
    """The start-up figures in one table: ``remote-acp run`` beside the raw stdlib client and acpx,
    from the same rounds, with the ratio and the difference each target bounds, met or missed."""
    section("start-up side by side: one-chunk session, same agent, same rounds (medians)")
    ours = median(samples[ours_name])
    table = Table("contender", "median", "min", "p90", "n", "run / this", "run - this", "target", "verdict")
    bounds: dict[str, tuple[str, bool]] = {ours_name: (f"run <= {fmt_s(RUN_TARGET_S)}", ours <= RUN_TARGET_S)}
    rawm = median(samples[raw])
    bounds[raw] = (f"run <= raw + {fmt_s(RAW_EXTRA_TARGET_S)}", ours - rawm <= RAW_EXTRA_TARGET_S)
    if node_run is not None:
        nodem = median(samples[node_run])
        bounds[node_run] = (f"run <= {ACPX_RATIO_TARGET:.2f}x acpx", ours / nodem <= ACPX_RATIO_TARGET)
    for name, (bound, met) in bounds.items():
        values = samples[name]
        here = median(values)
        table.add(
            name,
            fmt_s(here),
            fmt_s(min(values)),
            fmt_s(quantile(values, 0.9)),
            str(len(values)),
            f"{ours / here:.2f}x",
            f"{ours - here:+.3f} s",
            bound,
            "met" if met else "missed",
        )
    table.print()
    if node_run is None:
        print("acpx: not measured in this run (see the acpx line above); its target is not reported")
    load = os.getloadavg()
    print(f"load average after the rounds: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} CPUs)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15, help="recorded rounds (default 15)")
    parser.add_argument("--warmup", type=int, default=2, help="unrecorded rounds first (default 2)")
    parser.add_argument("--sdk-runs", type=int, default=7, help="recorded runs of the slow SDK contenders")
    parser.add_argument("--no-acpx", action="store_true", help="leave acpx out (no install attempt)")
    parser.add_argument("--summary-file", help="save the target checks as JSON (used by run_all)")
    args = parser.parse_args()

    summary = Summary("session overhead")
    with benchmark_process(summary, args.summary_file), tempfile.TemporaryDirectory() as home:
        measure(args, summary, home)


def measure(args: argparse.Namespace, summary: Summary, home: str) -> None:
    cli = cli_argv()
    agent = agent_command()
    sdk_py = sdk_python()
    node, node_note = (None, "acpx: left out (--no-acpx)") if args.no_acpx else acpx(home)
    workspace = str(REPO)
    peak: dict[str, list[int]] = {}

    def whole(name: str, argv: list[str], env: dict[str, str] | None = None) -> tuple[str, Callable[[], float]]:
        def run() -> float:
            timed = run_timed(argv, env=env)
            peak.setdefault(name, []).append(timed.maxrss_kib)
            return timed.seconds

        return name, run

    run_plain = "remote-acp run"
    run_json = "remote-acp run --json"
    sdk = "SDK client (whole process)"
    raw = "raw stdlib client (whole process)"
    node_run = "acpx exec (whole process)"
    anchors = (sdk, raw, node_run)
    contenders: dict[str, Callable[[], float]] = dict(
        [
            whole(run_plain, [*cli, "run", "--workspace", workspace, "--agent", agent, PROMPT]),
            whole(run_json, [*cli, "run", "--json", "--workspace", workspace, "--agent", agent, PROMPT]),
            whole(raw, [PY, str(ANCHORS / "raw_client.py"), "run", PROMPT, *agent_argv()]),
        ]
    )
    if node is not None:
        contenders.update([whole(node_run, node.argv(PROMPT, workspace), node.env())])
    if sdk_py is not None:
        contenders.update([whole(sdk, [sdk_py, str(ANCHORS / "sdk_client.py"), "run", PROMPT, *agent_argv()])])
    contenders["agent alone (spawn, initialize, exit)"] = agent_alone
    contenders["python -c pass (interpreter start)"] = lambda: run_timed([PY, "-c", "pass"]).seconds
    contenders["remote-acp --version"] = lambda: run_timed([*cli, "--version"]).seconds
    if node is not None:
        contenders["acpx --version (node start + CLI load)"] = lambda: (
            run_timed([node.exe, "--version"], env=node.env()).seconds
        )
    contenders["import remote_acp"] = lambda: import_time(PY, "remote_acp")
    contenders["import remote_acp.session.core (library)"] = lambda: import_time(PY, "remote_acp.session.core")
    contenders[I_CLI] = lambda: import_time(PY, CLI_RUN_IMPORTS)
    contenders[W_CLI] = lambda: run_timed([PY, "-c", f"import {CLI_RUN_IMPORTS}"]).seconds
    contenders[I_PYDANTIC] = lambda: import_time(PY, PYDANTIC_MODEL)
    contenders[I_NO_PYDANTIC] = lambda: import_time(PY, NO_PYDANTIC_IMPORTS)
    if sdk_py is not None:
        contenders["import acp (SDK)"] = lambda: import_time(sdk_py, "acp")
    slow = {sdk: args.sdk_runs, "import acp (SDK)": args.sdk_runs}

    section(f"session overhead: one-chunk local session, {args.runs} rounds after {args.warmup} warm-up")
    print(f"agent: {agent}")
    print(f"CLI:   {' '.join(cli)}")
    print(f"SDK:   {sdk_py or 'not found (set REMOTE_ACP_BENCH_SDK_PYTHON); SDK rows skipped'}")
    print(node_note)
    if node is not None:
        print(f"acpx:  {' '.join(node.argv(PROMPT, workspace))}")
    samples = {k: v for k, v in interleaved(contenders, args.runs, args.warmup, slow).items() if v}

    side_by_side(samples, run_plain, raw, node_run if node_run in samples else None)

    ours = median(samples[run_plain])
    section("every contender")
    table = Table("contender", "median", "min", "p90", "n", "peak RSS", "run / this", "DESIGN ref")
    for name, values in samples.items():
        rss = peak.get(name)
        ratio = ours / median(values) if name in anchors or name.startswith("agent") else None
        ref = DESIGN_REF.get(name)
        table.add(
            name,
            fmt_s(median(values)),
            fmt_s(min(values)),
            fmt_s(quantile(values, 0.9)),
            str(len(values)),
            fmt_mib(median(rss)) if rss else "",
            f"{ratio:.2f}" if ratio is not None else "",
            fmt_s(ref) if ref is not None else "",
        )
    table.print()
    print("run / this: median of `remote-acp run` divided by the anchor's median (< 1: ours is faster).")
    print("peak RSS: ru_maxrss from wait4 (the process itself, or a reaped child if that was larger).")

    floor = min(samples["python -c pass (interpreter start)"])
    rawm = min(samples[raw])
    best = min(samples[run_plain])
    section("where the time of `remote-acp run` goes (differences of minimums: the least disturbed runs)")
    parts = Table("share", "seconds", "of run")
    parts.add("remote-acp run (fastest run)", fmt_s(best), "100%")
    imports = min(samples[I_CLI])
    loaded = min(samples[W_CLI])
    pyd = min(samples[I_PYDANTIC])
    parts.add("interpreter start and exit (python -c pass)", fmt_s(floor), f"{floor / best:.0%}")
    parts.add("imports of the run path (in process)", fmt_s(imports), f"{imports / best:.0%}")
    parts.add("  of which pydantic + its first model class (alone)", fmt_s(pyd), f"{pyd / best:.0%}")
    parts.add(
        "exit with those modules loaded (rest of the import-only process)",
        fmt_s(loaded - floor - imports),
        f"{(loaded - floor - imports) / best:.0%}",
    )
    parts.add(
        "the run itself (spawn, handshake, turn, teardown, rendering)",
        fmt_s(best - loaded),
        f"{(best - loaded) / best:.0%}",
    )
    parts.add("for comparison: raw client's whole process minus python -c pass", fmt_s(rawm - floor), "")
    parts.add(
        "for comparison: agent alone (spawn, initialize, exit)",
        fmt_s(min(samples["agent alone (spawn, initialize, exit)"])),
        "",
    )
    parts.add(
        "for comparison: library imports without pydantic (+ asyncio backend)",
        fmt_s(min(samples[I_NO_PYDANTIC])),
        "",
    )
    parts.print()

    summary.add(Check("remote-acp run, one-chunk local session (median wall)", ours, RUN_TARGET_S, "s"))
    summary.add(
        Check(
            "remote-acp run --json, one-chunk local session (median wall)",
            median(samples[run_json]),
            RUN_TARGET_S,
            "s",
        )
    )
    summary.add(
        Check("remote-acp --version (median wall)", median(samples["remote-acp --version"]), VERSION_TARGET_S, "s")
    )
    if node_run in samples:
        summary.add(
            Check(
                "remote-acp run / acpx exec, one-chunk local session (ratio of medians)",
                ours / median(samples[node_run]),
                ACPX_RATIO_TARGET,
                "x",
            )
        )
    else:
        print(f"no acpx figure: {node_note}")
    summary.add(
        Check(
            "remote-acp run - raw stdlib client, one-chunk local session (difference of medians)",
            ours - median(samples[raw]),
            RAW_EXTRA_TARGET_S,
            "s",
            note=f"raw client {fmt_s(median(samples[raw]))}",
        )
    )
    print(f"ratio remote-acp run / target {RUN_TARGET_S:.2f} s: {ours / RUN_TARGET_S:.2f}")
    for name in (sdk, raw):
        if name in samples:
            here, ref = ours / median(samples[name]), RUN_TARGET_S / DESIGN_REF[name]
            print(
                f"ratio remote-acp run / {name}: {here:.2f} here; the target was {ref:.2f}x this anchor as "
                f"DESIGN measured it ({'within' if here <= ref else 'beyond'} that ratio)"
            )


if __name__ == "__main__":
    main()
