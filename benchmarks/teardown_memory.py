"""Teardown time and client memory, ours against the anchors.

    python -m benchmarks.teardown_memory [--runs 10] [--stubborn-runs 5] [--stop-grace-ms 500]

Teardown is timed in this process, from the last statement inside ``async with open_session(...)``
(after a one-chunk turn) to the statement after the block: what a caller waits for. Two agents:
a cooperative one (exits on SIGTERM or stdin EOF) and one ignoring SIGTERM and stdin EOF
(``--ignore-sigterm --no-stdin-eof-exit``), which only SIGKILL at the end of ``stop_grace_ms``
stops. The anchors' teardown (SDK: close stdin, wait up to 2 s, SIGTERM, 2 s, SIGKILL; raw: close
stdin and wait) is timed inside their own processes.

Memory is the RSS of a client process holding sessions, read from ``/proc/self/status`` by that
process itself (the agents are separate processes and are not counted): a worker
(``benchmarks._hold``) holding one idle session, then fifty; the SDK and raw clients holding one;
and the peak RSS of the whole ``remote-acp run`` process. A breakdown shows what the imports cost.
"""

from __future__ import annotations

import argparse
import os
import time

import anyio

from remote_acp.options import SessionOptions
from remote_acp.session.core import open_session

from ._agents import IGNORES_SIGTERM_AND_EOF, agent_argv, agent_command
from ._harness import benchmark_process
from ._proc import alive
from ._programs import ANCHORS, PY, REPO, cli_argv, sdk_python
from ._report import Check, Summary, Table, fmt_mib, fmt_ms, section
from ._timing import median, run_json, run_timed

TEARDOWN_TARGET_MS = 50.0
ONE_SESSION_MIB = 30.0
FIFTY_SESSIONS_MIB = 100.0
DESIGN_REF_MIB = {"SDK client holding one session": 42.0, "raw stdlib client holding one session": 14.0}

BREAKDOWN = {
    "python, nothing imported": "pass",
    "import json, subprocess (the raw client)": "import json, subprocess",
    "import asyncio (pulls in ssl)": "import asyncio",
    "import anyio + anyio.run (asyncio backend)": "import anyio; anyio.run(anyio.sleep, 0)",
    "import pydantic": "import pydantic",
    "pydantic + one model class": "import pydantic\nclass M(pydantic.BaseModel):\n    x: int",
    "the library modules without pydantic + anyio.run": (
        "import anyio, remote_acp.session.connection, remote_acp.protocol.normalize, remote_acp.session.turn, "
        "remote_acp.targets.launch, remote_acp.events, remote_acp.logs\nanyio.run(anyio.sleep, 0)"
    ),
    "import remote_acp.session.core": "import remote_acp.session.core",
    "import remote_acp.cli.run (CLI run path)": "import remote_acp.cli.run",
}


async def library_sessions(options: SessionOptions, runs: int) -> dict[str, list[float]]:
    """start / turn / teardown of ``runs`` sessions (after one warm-up); fails on a surviving agent."""
    phases: dict[str, list[float]] = {"start": [], "turn": [], "teardown": []}
    for index in range(runs + 1):
        t0 = time.perf_counter()
        async with open_session(os.getcwd(), options) as session:
            t1 = time.perf_counter()
            result = await session.run_turn("hi")
            pid = session.pid
            t2 = time.perf_counter()
        t3 = time.perf_counter()
        if result.outcome != "turn_completed":
            raise RuntimeError(f"turn ended {result.outcome}")
        if alive(pid):
            raise RuntimeError(f"agent {pid} survived the teardown")
        if index:
            for name, value in zip(phases, (t1 - t0, t2 - t1, t3 - t2), strict=True):
                phases[name].append(value)
    return phases


def rss_of(code: str) -> int:
    probe = code + "\nimport re\nprint(re.search(r'VmRSS:\\s+(\\d+)', open('/proc/self/status').read()).group(1))"
    return int(run_timed([PY, "-c", probe], capture=True).stdout.decode().strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10, help="sessions timed with the cooperative agent")
    parser.add_argument("--stubborn-runs", type=int, default=5, help="sessions timed with the SIGTERM-ignoring one")
    parser.add_argument("--stop-grace-ms", type=int, default=500, help="stop_grace_ms for the stubborn agent")
    parser.add_argument("--anchor-runs", type=int, default=3, help="runs of the SDK and raw clients")
    parser.add_argument("--memory-runs", type=int, default=3, help="runs of the one-session memory worker")
    parser.add_argument("--sessions", type=int, default=50, help="idle sessions held by one worker")
    parser.add_argument("--no-sdk-stubborn", action="store_true", help="skip the SDK on the stubborn agent (~4 s)")
    parser.add_argument("--summary-file", help="save the target checks as JSON (used by run_all)")
    args = parser.parse_args()
    summary = Summary("teardown and memory")
    with benchmark_process(summary, args.summary_file):
        teardown(args, summary)
        memory(args, summary)


def teardown(args: argparse.Namespace, summary: Summary) -> None:
    grace = args.stop_grace_ms
    section("teardown (medians; ours timed by the caller, anchors inside their own process)")
    cooperative = anyio.run(library_sessions, SessionOptions(command=agent_argv()), args.runs)
    stubborn_options = SessionOptions(command=agent_argv(*IGNORES_SIGTERM_AND_EOF), stop_grace_ms=grace)
    stubborn = anyio.run(library_sessions, stubborn_options, args.stubborn_runs)
    sdk_py = sdk_python()
    anchors: dict[str, list[dict[str, float]]] = {}
    for _ in range(args.anchor_runs):
        if sdk_py is not None:
            anchors.setdefault("sdk", []).append(
                run_json([sdk_py, str(ANCHORS / "sdk_client.py"), "stats", "hi", *agent_argv()])
            )
        anchors.setdefault("raw", []).append(
            run_json([PY, str(ANCHORS / "raw_client.py"), "stats", "hi", *agent_argv()])
        )
    if sdk_py is not None and not args.no_sdk_stubborn:
        anchors["sdk_stubborn"] = [
            run_json([sdk_py, str(ANCHORS / "sdk_client.py"), "stats", "hi", *agent_argv(*IGNORES_SIGTERM_AND_EOF)])
        ]
    args.anchor_stats = anchors

    coop_ms = median(cooperative["teardown"]) * 1000
    stub_ms = median(stubborn["teardown"]) * 1000
    table = Table("agent / client", "teardown", "min", "max", "n", "ours / this", "target")
    table.add(
        "cooperative / ours",
        fmt_ms(coop_ms / 1000),
        fmt_ms(min(cooperative["teardown"])),
        fmt_ms(max(cooperative["teardown"])),
        str(len(cooperative["teardown"])),
        "1.00",
        f"<= {TEARDOWN_TARGET_MS:.0f} ms",
    )
    for key, label in (("sdk", "cooperative / SDK client"), ("raw", "cooperative / raw stdlib client")):
        if key in anchors:
            values = [a["teardown_s"] for a in anchors[key]]
            table.add(
                label,
                fmt_ms(median(values)),
                fmt_ms(min(values)),
                fmt_ms(max(values)),
                str(len(values)),
                f"{coop_ms / 1000 / median(values):.2f}",
            )
    table.add(
        f"ignores SIGTERM and EOF / ours (stop_grace_ms={grace})",
        fmt_ms(stub_ms / 1000),
        fmt_ms(min(stubborn["teardown"])),
        fmt_ms(max(stubborn["teardown"])),
        str(len(stubborn["teardown"])),
        "1.00",
        f"<= {grace + 50} ms",
    )
    if "sdk_stubborn" in anchors:
        value = anchors["sdk_stubborn"][0]["teardown_s"]
        table.add(
            "ignores SIGTERM and EOF / SDK client (fixed 2 s + 2 s)",
            fmt_ms(value),
            "",
            "",
            "1",
            f"{stub_ms / 1000 / value:.2f}",
        )
    table.print()
    print("ours / this: our median teardown divided by the anchor's (< 1: ours is faster).")
    print("Every agent of ours was checked gone (reaped) right after its teardown.")

    phases = Table("our session, cooperative agent (in process)", "start", "one-chunk turn", "teardown")
    phases.add(
        "median",
        fmt_ms(median(cooperative["start"])),
        fmt_ms(median(cooperative["turn"])),
        fmt_ms(median(cooperative["teardown"])),
    )
    for key, label in (("sdk", "SDK client, median"), ("raw", "raw stdlib client, median")):
        if key in anchors:
            phases.add(
                label,
                fmt_ms(median([a["start_s"] for a in anchors[key]])),
                fmt_ms(median([a["turn_s"] for a in anchors[key]])),
                fmt_ms(median([a["teardown_s"] for a in anchors[key]])),
            )
    print()
    phases.print()

    summary.add(Check("teardown, cooperative agent (median)", coop_ms, TEARDOWN_TARGET_MS, "ms"))
    summary.add(
        Check(
            f"teardown, agent ignoring SIGTERM, stop_grace_ms={grace} (median)",
            stub_ms,
            grace + 50.0,
            "ms",
        )
    )


def memory(args: argparse.Namespace, summary: Summary) -> None:
    section("client memory: RSS of the client process itself (agents not counted)")
    hold = [PY, "-m", "benchmarks._hold"]
    one = [run_json([*hold, "1", *agent_argv()]) for _ in range(args.memory_runs)]
    many = run_json([*hold, str(args.sessions), *agent_argv()], timeout=600)
    cli_runs = [run_timed([*cli_argv(), "run", "--agent", agent_command(), "hi"]) for _ in range(args.memory_runs)]
    anchors: dict[str, list[dict[str, float]]] = args.anchor_stats

    one_kib = median([r["rss_kib"] for r in one])
    table = Table("client", "RSS", "peak", "n", "ours / this", "DESIGN ref")
    table.add(
        "ours: library worker holding one idle session",
        fmt_mib(one_kib),
        fmt_mib(median([r["hwm_kib"] for r in one])),
        str(len(one)),
        "1.00",
    )
    table.add(
        f"ours: library worker holding {many['sessions']} idle sessions",
        fmt_mib(many["rss_kib"]),
        fmt_mib(many["hwm_kib"]),
        "1",
    )
    for key, label in (("sdk", "SDK client holding one session"), ("raw", "raw stdlib client holding one session")):
        if key in anchors:
            rss = median([a["rss_kib"] for a in anchors[key]])
            table.add(
                label,
                fmt_mib(rss),
                fmt_mib(median([a["hwm_kib"] for a in anchors[key]])),
                str(len(anchors[key])),
                f"{one_kib / rss:.2f}",
                f"{DESIGN_REF_MIB[label]:.1f} MiB",
            )
    cli_peak = median([r.maxrss_kib for r in cli_runs])
    table.add(
        "remote-acp run, whole process (peak, wait4)",
        "",
        fmt_mib(cli_peak),
        str(len(cli_runs)),
        f"{one_kib / cli_peak:.2f}",
    )
    table.print()
    print("ours / this: the worker's RSS with one session divided by the client's (< 1: ours is smaller).")
    per_session = (many["rss_kib"] - one_kib) / max(1, many["sessions"] - 1)
    print(
        f"worker before importing the library: {fmt_mib(median([r['start_kib'] for r in one]))}; "
        f"after `from remote_acp import SessionOptions, open_session`: "
        f"{fmt_mib(median([r['imported_kib'] for r in one]))}; "
        f"each further idle session: {per_session:.0f} KiB"
    )

    section("what the imports cost: RSS of a fresh interpreter after ...")
    os.chdir(REPO)
    breakdown = Table("code", "RSS")
    for label, code in BREAKDOWN.items():
        breakdown.add(label, fmt_mib(rss_of(code)))
    breakdown.print()

    summary.add(Check("client RSS holding one session (library worker)", one_kib / 1024, ONE_SESSION_MIB, "MiB"))
    summary.add(
        Check(
            f"client RSS holding {many['sessions']} idle sessions (library worker)",
            many["rss_kib"] / 1024,
            FIFTY_SESSIONS_MIB,
            "MiB",
        )
    )
    summary.add(
        Check("remote-acp run peak RSS, one session (whole CLI process)", cli_peak / 1024, ONE_SESSION_MIB, "MiB")
    )


if __name__ == "__main__":
    main()
