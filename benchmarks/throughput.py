"""Chunks per second through framing + JSON-RPC + normalization, ours against the anchors.

    python -m benchmarks.throughput [--chunks 100000] [--runs 5] [--sdk-runs 2] [--profile]

One turn of the scriptable agent streams ``--chunks`` one-character ``agent_message_chunk``
updates (``@bulk=N``: the agent writes them pre-built, so it is never the bottleneck). Rates are
chunks divided by the turn's time (prompt sent to the turn's end), the session start excluded.
Contenders run interleaved, one of each per round (the slow anchors in fewer rounds):

- ours: ``open_session`` + ``Session.run_turn(on_event=counter)`` in this process, a fresh
  session (and event loop) per round;
- the official SDK's client on the same agent and turn (its own process);
- a raw stdlib client on the same agent and turn (read lines, ``json.loads``, dict access);
- over the turn's lines captured once to a file: the raw loop alone, and bare ``json.loads``;
- our core without a subprocess or an event loop: the captured bytes fed in 256 KiB reads to
  ``LineFramer.feed``, then ``JsonRpcPeer.receive``, then ``Normalizer.on_update``, stage by
  stage, to show where the time goes.

``--profile`` adds a cProfile of one of our turns (top functions by own time).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from remote_acp.options import SessionOptions
from remote_acp.protocol.framing import OVERSIZED, LineFramer
from remote_acp.protocol.jsonrpc import JsonRpcPeer, RpcNotification
from remote_acp.protocol.normalize import Normalizer
from remote_acp.session.core import open_session
from remote_acp.targets.process.agent import READ_SIZE

from ._agents import agent_argv, bulk_prompt
from ._harness import benchmark_process
from ._programs import ANCHORS, PY, sdk_python
from ._report import Check, Summary, Table, fmt_rate, fmt_s, section
from ._timing import interleaved, median, run_json

if TYPE_CHECKING:
    from collections.abc import Callable

    from remote_acp.events import Event

TARGET_PER_S = 50_000.0
DESIGN_REF = {
    "SDK client (subprocess, live agent)": 16_800.0,
    "raw stdlib client (subprocess, live agent)": 107_000.0,
    "bare json.loads over the captured lines": 210_000.0,
}


# --------------------------------------------------------------------------- capture


def capture(path: Path, chunks: int) -> bytes:
    """Run the agent once with a tiny driver; save the turn's ``session/update`` lines."""
    proc = subprocess.Popen(agent_argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        requests: list[tuple[str, dict[str, Any]]] = [
            ("initialize", {"protocolVersion": 1}),
            ("session/new", {"cwd": "/", "mcpServers": []}),
            ("session/prompt", {"sessionId": None, "prompt": [{"type": "text", "text": bulk_prompt(chunks)}]}),
        ]
        lines: list[bytes] = []
        session_id = None
        for request_id, (method, params) in enumerate(requests, 1):
            if method == "session/prompt":
                params["sessionId"] = session_id
            message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            proc.stdin.write(json.dumps(message).encode() + b"\n")
            proc.stdin.flush()
            for line in proc.stdout:
                decoded = json.loads(line)
                if decoded.get("id") == request_id:
                    if method == "session/new":
                        session_id = decoded["result"]["sessionId"]
                    break
                if method == "session/prompt":
                    lines.append(line)
        proc.stdin.close()
        proc.wait(timeout=30)
        proc.stdout.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    data = b"".join(lines)
    path.write_bytes(data)
    if len(lines) != chunks:
        raise RuntimeError(f"captured {len(lines)} lines, expected {chunks}")
    return data


# --------------------------------------------------------------------------- ours


class Counter:
    __slots__ = ("deltas",)

    def __init__(self) -> None:
        self.deltas = 0

    def __call__(self, event: Event) -> None:
        if getattr(event, "delta", None) is not None:
            self.deltas += 1


async def ours_turn(chunks: int, profile: bool = False) -> tuple[float, pstats.Stats | None]:
    """The time of one ``chunks``-chunk turn on a fresh session (and its cProfile if asked)."""
    options = SessionOptions(command=agent_argv())
    counter = Counter()
    profiler = cProfile.Profile() if profile else None
    async with open_session(str(Path.cwd()), options) as session:
        start = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        result = await session.run_turn(bulk_prompt(chunks), counter)
        if profiler is not None:
            profiler.disable()
        elapsed = time.perf_counter() - start
    if result.outcome != "turn_completed" or counter.deltas != chunks:
        raise RuntimeError(f"turn ended {result.outcome} after {counter.deltas} chunks")
    return elapsed, pstats.Stats(profiler) if profiler is not None else None


def client_rate(argv: list[str], chunks: int) -> float:
    """Chunks per second of an anchor client's turn, as the client itself timed it."""
    result = run_json(argv)
    if result["chunks"] != chunks:
        raise RuntimeError(f"{argv[1]} counted {result['chunks']} chunks, expected {chunks}")
    return chunks / float(result["turn_s"])


# --------------------------------------------------------------------------- in-process loops


def timed_rate(chunks: int, fn: Callable[..., object], *args: object) -> float:
    start = time.perf_counter()
    fn(*args)
    return chunks / (time.perf_counter() - start)


def raw_loop(path: Path) -> int:
    """The raw stdlib loop: read lines, ``json.loads``, dict access."""
    count = 0
    with path.open("rb") as fh:
        for line in fh:
            message = json.loads(line)
            if message.get("method") == "session/update":
                update = message["params"]["update"]
                if update["sessionUpdate"] == "agent_message_chunk":
                    count += len(update["content"]["text"])
    return count


def bare_loads(lines: list[bytes]) -> None:
    loads = json.loads
    for line in lines:
        loads(line)


def pieces(data: bytes) -> list[bytes]:
    return [data[i : i + READ_SIZE] for i in range(0, len(data), READ_SIZE)]


def stage_framer(reads: list[bytes]) -> int:
    framer = LineFramer()
    count = 0
    for data in reads:
        count += len(framer.feed(data))
    return count


def stage_jsonrpc(reads: list[bytes]) -> int:
    framer, peer = LineFramer(), JsonRpcPeer()
    count = 0
    for data in reads:
        for frame in framer.feed(data):
            if frame is OVERSIZED:
                continue
            if isinstance(peer.receive(frame), RpcNotification):
                count += 1
    return count


def stage_normalize(reads: list[bytes], session_id: str) -> int:
    """What the reader task does per line: frame, classify, dispatch, normalize into events."""
    framer, peer, normalizer = LineFramer(), JsonRpcPeer(), Normalizer(pid=1)
    normalizer.session_id = session_id
    events: list[Event] = []
    emit = events.append
    for data in reads:
        for frame in framer.feed(data):
            if frame is OVERSIZED:
                continue
            message = peer.receive(frame)
            if isinstance(message, RpcNotification) and message.method == "session/update":
                normalizer.on_update(message.params, emit)
    normalizer.flush(emit)
    return len(events)


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=100_000, help="chunks in the turn (default 100000)")
    parser.add_argument("--runs", type=int, default=5, help="rounds (runs of every in-process contender)")
    parser.add_argument("--sdk-runs", type=int, default=2, help="runs of the SDK client (slow)")
    parser.add_argument("--raw-runs", type=int, default=3, help="runs of the raw client subprocess")
    parser.add_argument("--profile", action="store_true", help="cProfile one of our turns")
    parser.add_argument("--summary-file", help="save the target checks as JSON (used by run_all)")
    args = parser.parse_args()
    summary = Summary("throughput")
    with benchmark_process(summary, args.summary_file), tempfile.TemporaryDirectory() as tmp:
        measure(args, summary, Path(tmp))


def measure(args: argparse.Namespace, summary: Summary, tmp: Path) -> None:
    chunks = args.chunks
    section(f"throughput: one turn of {chunks:,} one-character chunks")
    path = tmp / "turn.ndjson"
    data = capture(path, chunks)
    lines = data.splitlines(keepends=True)
    session_id = json.loads(lines[0])["params"]["sessionId"]
    print(f"captured {len(lines):,} lines, {len(data):,} bytes ({len(data) / len(lines):.0f} bytes/line)")

    reads = pieces(data)
    name_ours = "ours: open_session + run_turn (in process, live agent)"
    name_sdk = "SDK client (subprocess, live agent)"
    name_raw = "raw stdlib client (subprocess, live agent)"
    name_loop = "raw stdlib loop over the captured lines"
    name_loads = "bare json.loads over the captured lines"
    contenders: dict[str, Callable[[], float]] = {
        name_ours: lambda: chunks / anyio.run(ours_turn, chunks)[0],
    }
    sdk_py = sdk_python()
    if sdk_py is not None:
        sdk_argv = [sdk_py, str(ANCHORS / "sdk_client.py"), "stats", bulk_prompt(chunks), *agent_argv()]
        contenders[name_sdk] = lambda: client_rate(sdk_argv, chunks)
    else:
        print("SDK client skipped: no interpreter can import acp (set REMOTE_ACP_BENCH_SDK_PYTHON)")
    raw_argv = [PY, str(ANCHORS / "raw_client.py"), "stats", bulk_prompt(chunks), *agent_argv()]
    contenders[name_raw] = lambda: client_rate(raw_argv, chunks)
    contenders[name_loop] = lambda: timed_rate(chunks, raw_loop, path)
    contenders[name_loads] = lambda: timed_rate(chunks, bare_loads, lines)
    core_names = {
        "core: LineFramer.feed only": lambda: timed_rate(chunks, stage_framer, reads),
        "core: + JsonRpcPeer.receive": lambda: timed_rate(chunks, stage_jsonrpc, reads),
        "core: + Normalizer.on_update (events built)": lambda: timed_rate(chunks, stage_normalize, reads, session_id),
    }
    contenders.update(core_names)
    samples = interleaved(
        contenders,
        args.runs,
        warmup=1,
        caps={name_sdk: args.sdk_runs, name_raw: args.raw_runs},
        cold=(name_sdk, name_raw),
    )
    rates = {name: values for name, values in samples.items() if name not in core_names and values}
    core = {name: samples[name] for name in core_names}
    stats = anyio.run(ours_turn, chunks, True)[1] if args.profile else None

    ours_rate = median(rates[name_ours])
    table = Table("contender", "median", "best", "n", "turn time", "ours / this", "DESIGN ref")
    for name, values in {**rates, **core}.items():
        rate = median(values)
        ref = DESIGN_REF.get(name)
        table.add(
            name,
            fmt_rate(rate),
            fmt_rate(max(values)),
            str(len(values)),
            fmt_s(chunks / rate),
            f"{ours_rate / rate:.2f}",
            fmt_rate(ref) if ref else "",
        )
    table.print()
    print("ours / this: our median rate divided by the contender's (> 1: ours is faster).")

    section("where our time per chunk goes (microseconds per chunk, from the best runs: the least disturbed)")
    per_chunk = Table("stage", "us/chunk", "of ours")
    total = 1e6 / max(rates[name_ours])
    previous = 0.0
    for name, values in core.items():
        cost = 1e6 / max(values)
        per_chunk.add(name.replace("core: ", ""), f"{cost - previous:.2f}", f"{(cost - previous) / total:.0%}")
        previous = cost
    per_chunk.add(
        "the rest: pipe reads, event loop, turn iteration, on_event",
        f"{total - previous:.2f}",
        f"{(total - previous) / total:.0%}",
    )
    per_chunk.add("total (ours, live)", f"{total:.2f}", "100%")
    per_chunk.print()

    if stats is not None:
        section("cProfile of one of our turns (top 20 by own time; profiling inflates call costs)")
        stats.sort_stats("tottime").print_stats(20)
        sys.stdout.flush()

    summary.add(
        Check(f"chunks/s, {chunks:,}-chunk turn (ours, median)", ours_rate, TARGET_PER_S, "/s", higher_is_better=True)
    )
    for name in (name_sdk, name_raw, name_loads):
        if name in rates:
            print(f"ratio ours / {name}: {ours_rate / median(rates[name]):.2f}")


if __name__ == "__main__":
    main()
