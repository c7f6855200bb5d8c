"""A 100,000-chunk turn through the whole command line, ours against the anchors, side by side.

    python -m benchmarks.cli_throughput [--chunks 100000] [--runs 3] [--json-runs 2] [--no-acpx]

Each contender is one whole process, as a user running it sees it: start, handshake, one turn
of the scriptable agent streaming ``--chunks`` one-character chunks (``@bulk=N``), teardown, with
its text output redirected to a file. The rate is chunks divided by that wall time, so start-up
is included for everyone. Contenders run interleaved, one of each per round:

- ``remote-acp run`` (text to a file; the figure of the target) and ``remote-acp run --json``;
- the raw stdlib client (``anchors/raw_client.py run``: read lines, ``json.loads``, print the text);
- acpx ``exec`` (the Node command line, pinned by ``scripts/install-acpx.sh``) with the same agent.

The output of each is checked (every chunk's ``x`` reached the file) so a run that drops text
cannot look fast.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ._agents import agent_argv, agent_command, bulk_prompt
from ._harness import benchmark_process
from ._programs import ANCHORS, PY, REPO, acpx, cli_argv
from ._report import Check, Summary, Table, fmt_rate, fmt_s, section
from ._timing import interleaved, median, run_timed

if TYPE_CHECKING:
    from collections.abc import Callable

TARGET_OF_RAW = 0.50
"""The whole ``remote-acp run`` at least this fraction of the raw client's rate."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=100_000, help="chunks in the turn (default 100000)")
    parser.add_argument("--runs", type=int, default=3, help="recorded rounds (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="unrecorded rounds first (default 1)")
    parser.add_argument("--json-runs", type=int, default=2, help="recorded runs of remote-acp run --json")
    parser.add_argument("--no-acpx", action="store_true", help="leave acpx out (no install attempt)")
    parser.add_argument("--summary-file", help="save the target checks as JSON (used by run_all)")
    args = parser.parse_args()
    summary = Summary("CLI throughput")
    with benchmark_process(summary, args.summary_file), tempfile.TemporaryDirectory() as tmp:
        measure(args, summary, Path(tmp))


def measure(args: argparse.Namespace, summary: Summary, tmp: Path) -> None:
    chunks: int = args.chunks
    prompt = bulk_prompt(chunks)
    cli = cli_argv()
    agent = agent_command()
    workspace = str(REPO)
    home = tmp / "home"
    home.mkdir()
    node, node_note = (None, "acpx: left out (--no-acpx)") if args.no_acpx else acpx(str(home))

    def whole(argv: list[str], env: dict[str, str] | None = None, *, json_lines: bool = False) -> Callable[[], float]:
        output = tmp / "out"

        def run() -> float:
            timed = run_timed(argv, env=env, output=output)
            got = output.read_bytes()
            # --json carries one event per chunk; text carries the chunks themselves.
            seen = got.count(b'"delta": "x"') + got.count(b'"delta":"x"') if json_lines else got.count(b"x")
            if seen < chunks:
                raise RuntimeError(f"{argv[0]} wrote {seen} of {chunks} chunks to its output")
            return chunks / timed.seconds

        return run

    name_ours = "remote-acp run (text to a file)"
    name_json = "remote-acp run --json (to a file)"
    name_raw = "raw stdlib client (text to a file)"
    name_node = "acpx exec (text to a file)"
    contenders: dict[str, Callable[[], float]] = {
        name_ours: whole([*cli, "run", "--workspace", workspace, "--agent", agent, prompt]),
        name_raw: whole([PY, str(ANCHORS / "raw_client.py"), "run", prompt, *agent_argv()]),
        name_json: whole([*cli, "run", "--json", "--workspace", workspace, "--agent", agent, prompt], json_lines=True),
    }
    if node is not None:
        contenders[name_node] = whole(node.argv(prompt, workspace), node.env())

    section(f"CLI throughput: one {chunks:,}-chunk turn, whole process, {args.runs} rounds after {args.warmup} warm-up")
    print(f"agent: {agent}")
    print(node_note)
    samples = interleaved(contenders, args.runs, args.warmup, caps={name_json: args.json_runs})
    rates = {name: values for name, values in samples.items() if values}

    ours = median(rates[name_ours])
    table = Table("contender", "median", "best", "n", "wall (median)", "ours / this")
    for name, values in rates.items():
        rate = median(values)
        table.add(
            name,
            fmt_rate(rate),
            fmt_rate(max(values)),
            str(len(values)),
            fmt_s(chunks / rate),
            f"{ours / rate:.2f}",
        )
    table.print()
    print("rate: chunks / wall time of the whole process (start-up included).")
    print("ours / this: the median rate of `remote-acp run` divided by the contender's (> 1: ours is faster).")

    summary.add(
        Check(
            f"remote-acp run, {chunks:,}-chunk turn to a file, rate / raw client's",
            ours / median(rates[name_raw]),
            TARGET_OF_RAW,
            "%",
            higher_is_better=True,
            note=f"ours {fmt_rate(ours)}, raw {fmt_rate(median(rates[name_raw]))}",
        )
    )
    if name_node in rates:
        print(f"ratio remote-acp run / acpx exec (rates): {ours / median(rates[name_node]):.2f}")


if __name__ == "__main__":
    main()
