"""``remote-acp run`` driving the real Gemini CLI (pinned, offline, against the mock Gemini API):
measured tokens per turn and per run, a token ceiling that stops the run, and a session created by
one process and continued by another within the same UTC minute that keeps its history."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest

from integration.gemini_fixtures import gemini_installed, gemini_mock
from tests.support.gemini import gemini_command, gemini_env
from tests.support.gemini_mock import GeminiMock, Usage

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["gemini_installed", "gemini_mock"]  # fixtures, registered by import

pytestmark = pytest.mark.usefixtures("gemini_installed")
SLOW = pytest.mark.timeout(150)  # each run starts gemini (about 4 s) and waits for its telemetry

# A pinned model: one model call per turn (no routing classifier), so a turn's figures are the
# mock's usageMetadata for that call.
MODEL = "gemini-2.5-flash"
CLI = [sys.executable, "-m", "remote_acp.cli.main"]
# gemini takes about 4 s to answer initialize, and its telemetry is written up to 5 s after a
# turn: generous bounds for a loaded machine.
BOUNDS = ("--read-timeout-ms", "15000", "--stop-grace-ms", "3000")


def run(env: dict[str, str], workspace: str, *args: str) -> subprocess.CompletedProcess[str]:
    agent = shlex.join(gemini_command(model=MODEL))
    argv = [*CLI, "run", "--agent", agent, "--workspace", workspace, *BOUNDS, *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=240, check=False)


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def sessions(env: dict[str, str], workspace: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [*CLI, "sessions", "--json", "--workspace", workspace], env=env, capture_output=True, text=True, check=True
    )
    return json_lines(done.stdout)


@SLOW
def test_a_measured_run_reports_each_turn_and_the_run_total(
    gemini_mock: GeminiMock, tmp_path: Path, workspace: str
) -> None:
    gemini_mock.usage.extend([Usage(prompt=1234, candidates=56, cached=200), Usage(prompt=2000, candidates=20)])
    env = gemini_env(tmp_path / "home", gemini_mock)
    done = run(env, workspace, "--json", "--max-tokens", "5000", "say hi", "again")
    assert done.returncode == 0, done.stderr
    lines = json_lines(done.stdout)
    usage = [line for line in lines if line["type"] == "token_usage"]
    figures = [(u["input_tokens"], u["output_tokens"], u["cache_read_tokens"], u["model"]) for u in usage]
    assert figures == [(1234, 56, 200, MODEL), (2000, 20, 0, MODEL)]
    # Each figure comes before its turn's end.
    types = [line["type"] for line in lines]
    assert [types[i + 1] for i, t in enumerate(types) if t == "token_usage"] == ["turn_completed"] * 2
    final = lines[-1]
    assert final["tokens"] == {
        "measured_turns": 2,
        "unmeasured_turns": 0,
        "input_tokens": 3234,
        "output_tokens": 76,
        "cache_read_tokens": 200,
        "total_tokens": sum(u["total_tokens"] for u in usage),
        "models": [MODEL],
        "max_tokens": 5000,
        "ceiling": "within",
    }


@SLOW
def test_a_measured_run_that_reaches_max_tokens_sends_no_further_prompt(
    gemini_mock: GeminiMock, tmp_path: Path, workspace: str
) -> None:
    gemini_mock.usage.append(Usage(prompt=1234, candidates=56, total=1290))
    env = gemini_env(tmp_path / "home", gemini_mock)
    done = run(env, workspace, "--json", "--max-tokens", "1000", "one", "two", "three")
    assert done.returncode == 7, done.stderr  # a final failure: the same prompts would reach it again
    final = json_lines(done.stdout)[-1]
    assert (final["outcome"], final["error_kind"]) == ("token_ceiling_reached", "turn_token_limit")
    assert final["message"] == "the run used 1290 tokens, reaching max_tokens 1000: 2 prompts not sent"
    assert (final["tokens"]["total_tokens"], final["tokens"]["ceiling"]) == (1290, "reached")
    assert [c.last_user_text.rsplit(maxsplit=1)[-1] for c in gemini_mock.calls("main")] == ["one"]
    [record] = sessions(env, workspace)
    assert (record["outcome"], record["error_kind"]) == ("token_ceiling_reached", "turn_token_limit")


@pytest.mark.timeout(240)  # two first runs at most, then what is left of a minute waited out
def test_a_session_continued_by_another_process_in_its_creation_minute_keeps_its_history(
    gemini_mock: GeminiMock, tmp_path: Path, workspace: str
) -> None:
    # Gemini CLI names a session's journal after the UTC minute it was created in, and a load in
    # that minute starts the journal afresh: the history is lost for good. The second process
    # must wait the minute out, knowing only what the session history recorded.
    env = gemini_env(tmp_path / "home", gemini_mock)
    for attempt in (1, 2, 3):
        first = run(env, workspace, "--json", "Remember the word heliotrope.")
        assert first.returncode == 0, first.stderr
        saved = json_lines(first.stdout)[-1]["session_id"]
        record = sessions(env, workspace)[0]
        assert record["session_id"] == saved
        created = datetime.fromisoformat(record["created"]).replace(second=0, microsecond=0)
        now = datetime.now(UTC)
        if created == now.replace(second=0, microsecond=0) and now.second < 50:
            break  # the next process starts well inside the session's minute
        # Crossed into the next minute (nothing would be waited for), or too near its end: the
        # next first run starts early in a minute and has most of it to finish in.
        assert attempt < 3, "no first run finished early enough within the minute it created its session in"
        if now.second >= 50:
            time.sleep(60.5 - now.second - now.microsecond / 1e6)

    gemini_mock.usage.append(Usage(prompt=321, candidates=12, cached=100))
    second = run(env, workspace, "--resume", saved, "Which word did I ask you to remember?")
    assert second.returncode == 0, second.stderr
    notes = second.stderr.splitlines()
    assert notes[0].startswith("remote-acp: waiting ") and f"before loading session {saved}:" in notes[0]
    assert not [n for n in notes if "could not continue" in n]  # loaded, not a new session
    # The history reached the model: the continued turn's request carries the first turn.
    last = gemini_mock.calls("main")[-1]
    assert "heliotrope" in json.dumps(last.body["contents"])
    assert last.last_user_text.endswith("Which word did I ask you to remember?")
    # The live reply ends stdout. (Gemini CLI may send the replayed reply after its answer to the
    # load, where it is not yet told from live output, so the whole of stdout is not compared.)
    assert second.stdout.endswith("Hello from the mock Gemini.\n")
    assert f"remote-acp: tokens: 321 in, 12 out, 100 cache-read ({MODEL})" in notes
    assert "remote-acp: tokens this run: 321 in, 12 out, 100 cache-read, 333 total" in notes
    latest = sessions(env, workspace)[0]
    assert (latest["session_id"], latest["obtained"], latest["created"]) == (saved, "loaded", record["created"])
