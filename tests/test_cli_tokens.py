"""What ``remote-acp run`` says about tokens when no source measures the session: "not measured",
never zero, counted as unmeasured, and a token ceiling that says it could not bound the run.
(Measured runs, against the real Gemini CLI: ``integration/test_gemini_cli.py``.)"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from tests.support.cli import AGENT, cli, json_lines

if TYPE_CHECKING:
    from pathlib import Path

UNMEASURED_TWO_TURNS: dict[str, Any] = {
    "measured_turns": 0,
    "unmeasured_turns": 2,
    "input_tokens": None,
    "output_tokens": None,
    "cache_read_tokens": None,
    "total_tokens": None,
    "models": [],
}


def tokens_of(done_stdout: str) -> dict[str, Any]:
    """The ``tokens`` object of a run's closing ``run_result`` line."""
    tokens = json_lines(done_stdout)[-1]["tokens"]
    assert isinstance(tokens, dict)
    return tokens


def prompts_sent(record: Path) -> list[str]:
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    return [m["params"]["prompt"][0]["text"] for m in lines if m.get("method") == "session/prompt"]


def test_an_unmeasured_run_says_not_measured_and_never_zero(workspace: str) -> None:
    # @usage sends the protocol's usage_update: context occupancy, not spend, so still no figure.
    done = cli("run", "--agent", AGENT, "--workspace", workspace, "@usage hello", "again")
    assert done.returncode == 0, done.stderr
    notes = done.stderr.splitlines()
    assert notes[-2:] == ["remote-acp: tokens: not measured", "remote-acp: session sess-1: turn_completed"]
    assert not re.search(r"\b0 (in|out|total)\b", done.stderr)
    assert "ceiling" not in done.stderr

    as_json = cli("run", "--json", "--agent", AGENT, "--workspace", workspace, "@usage hello", "again")
    assert as_json.returncode == 0, as_json.stderr
    lines = json_lines(as_json.stdout)
    assert not [line for line in lines if line["type"] == "token_usage"]
    assert lines[-1]["tokens"] == {**UNMEASURED_TWO_TURNS, "max_tokens": None, "ceiling": None}


def test_a_token_ceiling_cannot_bound_an_unmeasured_run_and_says_so(workspace: str, tmp_path: Path) -> None:
    record = tmp_path / "rec.jsonl"
    agent = f"{AGENT} --record {record}"
    done = cli("run", "--agent", agent, "--workspace", workspace, "--max-tokens", "10", "one", "two")
    assert done.returncode == 0, done.stderr
    assert prompts_sent(record) == ["one", "two"]  # nothing measured, nothing to stop on
    assert done.stderr.splitlines()[-3:] == [
        "remote-acp: tokens: not measured",
        "remote-acp: run reported no token usage, token ceiling could not bound it",
        "remote-acp: session sess-1: turn_completed",
    ]
    as_json = cli("run", "--json", "--agent", AGENT, "--workspace", workspace, "--max-tokens", "10", "one", "two")
    final = json_lines(as_json.stdout)[-1]
    assert (final["outcome"], final["error_kind"]) == ("turn_completed", None)
    assert final["tokens"] == {**UNMEASURED_TWO_TURNS, "max_tokens": 10, "ceiling": "not bounded"}


def test_the_workflows_max_tokens_is_the_ceiling_and_the_flag_wins(workspace: str, tmp_path: Path) -> None:
    workflow = tmp_path / "workflow.yaml"
    workflow.write_text(f"agent:\n  command: {AGENT}\n  max_tokens: 500\n")
    from_file = cli("run", "--json", "--config", str(workflow), "--workspace", workspace, "hi")
    assert from_file.returncode == 0, from_file.stderr
    assert tokens_of(from_file.stdout)["max_tokens"] == 500
    flag = cli("run", "--json", "--config", str(workflow), "--workspace", workspace, "--max-tokens", "7", "hi")
    assert tokens_of(flag.stdout)["max_tokens"] == 7


def test_a_ceiling_below_one_is_a_usage_error(workspace: str) -> None:
    done = cli("run", "--agent", AGENT, "--workspace", workspace, "--max-tokens", "0", "hi")
    assert done.returncode == 2 and "--max-tokens" in done.stderr


def test_a_run_that_never_started_counts_no_turn(tmp_path: Path) -> None:
    done = cli("run", "--json", "--agent", AGENT, "--workspace", str(tmp_path / "missing"), "--max-tokens", "5", "hi")
    final = json_lines(done.stdout)[-1]
    assert final["outcome"] == "start_failed"
    tokens = tokens_of(done.stdout)
    assert (tokens["measured_turns"], tokens["unmeasured_turns"]) == (0, 0)
    assert (tokens["total_tokens"], tokens["max_tokens"], tokens["ceiling"]) == (None, 5, None)
    text = cli("run", "--agent", AGENT, "--workspace", str(tmp_path / "missing"), "hi")
    assert "tokens" not in text.stderr  # no turn ran: nothing was or was not measured
