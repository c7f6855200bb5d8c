"""The measurement source without the real runtime: the telemetry parser, the incremental reader,
the claim, and restart to settle against the scripted agent (whose name a wrapper chooses)."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from typing import TYPE_CHECKING, Any

import pytest

from remote_acp import TokenUsage, open_session
from remote_acp.measure import MAX_STARTS, Measurement
from remote_acp.measure.gemini import GeminiSource
from remote_acp.measure.telemetry import frame_objects, sum_records, token_record
from remote_acp.protocol.normalize import vendor_token_figure
from remote_acp.session.remote_rules import rules_for
from tests.support.agents import fast_options, scripted

if TYPE_CHECKING:
    from pathlib import Path


def record(session_id: str = "s1", role: str = "main", **counts: int) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "event.name": "gemini_cli.api_response",
        "session.id": session_id,
        "model": "gemini-test",
        "role": role,
        "input_token_count": 10,
        "output_token_count": 2,
        "cached_content_token_count": 1,
        "thoughts_token_count": 3,
        "tool_token_count": 4,
        "total_token_count": 19,
    }
    attributes.update(counts)
    return {"hrTime": [1, 2], "resource": {"_rawAttributes": [["session.id", "process-id"]]}, "attributes": attributes}


def pretty(obj: Any) -> bytes:
    """How gemini-cli's file exporter writes an item: ``JSON.stringify(obj, null, 2) + "\\n"``."""
    return (json.dumps(obj, indent=2) + "\n").encode()


def test_pretty_printed_objects_are_framed_and_a_partial_one_is_left() -> None:
    one, two = pretty(record()), pretty({"descriptor": {"name": "m"}, "text": "a }\n b"})
    data = one + two + one[:40]
    objects, used = frame_objects(data)
    assert [token_record(o) is not None for o in objects] == [True, False]
    assert used == len(one) + len(two)
    assert frame_objects(data[used:] + one[40:]) == ([record()], len(one))


def test_a_damaged_object_is_skipped_and_reading_goes_on() -> None:
    objects, used = frame_objects(b'{\n  "a": oops\n}\n' + pretty(record()))
    assert objects == [record()] and used > 0


def test_a_record_counts_only_with_every_counter() -> None:
    assert token_record(record()) is not None
    assert token_record(record(total_token_count="19")) is None  # type: ignore[arg-type]
    missing = record()
    del missing["attributes"]["tool_token_count"]
    assert token_record(missing) is None
    assert token_record({"attributes": {"event.name": "gemini_cli.api_request", "session.id": "s1"}}) is None


def test_a_turn_figure_counts_every_call_and_names_the_main_model() -> None:
    records = [token_record(record(role="utility_router", model="lite")), token_record(record())]  # type: ignore[arg-type]
    figure = sum_records(r for r in records if r is not None)
    assert figure is not None
    assert (figure.model, figure.input_tokens, figure.output_tokens, figure.cache_read_tokens, figure.total_tokens) == (
        "gemini-test",
        28,
        10,
        2,
        38,
    )
    assert sum_records([]) is None


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero", "link to a file"])
def test_a_telemetry_file_swapped_for_a_fifo_or_a_link_is_never_read(kind: str, tmp_path: Path) -> None:
    """The runtime owns the file: what it puts in its place never hangs or floods the reader."""
    armed = GeminiSource().arm()
    try:
        path = armed.directory / "telemetry.log"
        if kind == "fifo":
            os.mkfifo(path)  # no writer: a blocking open would never return
        elif kind == "link to /dev/zero":
            path.symlink_to("/dev/zero")  # endless: a reader that followed it would never stop
        else:
            outside = tmp_path / "records"
            outside.write_bytes(pretty(record("s1")))
            path.symlink_to(outside)
        assert armed.read("s1") == []
    finally:
        armed.close()


def test_the_reader_reads_on_from_its_offset_for_its_session_only(tmp_path: Path) -> None:
    armed = GeminiSource().arm()
    try:
        path = armed.directory / "telemetry.log"
        assert armed.read("s1") == []  # nothing written yet
        first = pretty(record("s1")) + pretty(record("other"))
        path.write_bytes(first[:-30])
        assert [r.session_id for r in armed.read("s1")] == ["s1"]
        with path.open("ab") as f:
            f.write(first[-30:] + pretty(record("s1", input_token_count=7)))
        assert [r.input for r in armed.read("s1")] == [7]
        assert armed.read("s1") == []
    finally:
        armed.close()
    assert not armed.directory.exists()


@pytest.mark.parametrize(
    ("argv", "claimed"),
    [
        (["/opt/x/node_modules/.bin/gemini", "--acp"], True),
        (["node", "/opt/x/bundle/gemini.js", "--acp"], True),
        (["npx", "@google/gemini-cli@0.61.0", "--acp"], True),
        (["env", "A=1", "gemini"], True),
        (["/opt/run-agent.sh", "--acp"], False),
        (["qwen", "--acp"], False),
    ],
)
def test_a_claim_needs_the_command_to_name_the_runtime(argv: list[str], claimed: bool) -> None:
    assert GeminiSource().names(argv) is claimed


def test_no_claim_where_the_remote_rules_withhold_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    m = Measurement(["gemini", "--acp"], allowed=rules_for(True).measurement, log=logging.getLogger("t"))  # type: ignore[arg-type]
    assert m.arm_start() == {}
    assert m.settle("gemini-cli") is False  # never started again
    assert not m.measured and "remote" in m.why_not
    assert os.listdir(tmp_path) == []


def test_settling_removes_unused_directories_before_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    m = Measurement(["gemini"], allowed=True, log=logging.getLogger("t"))  # type: ignore[arg-type]
    assert "GEMINI_TELEMETRY_OUTFILE" in m.arm_start()
    assert len(os.listdir(tmp_path)) == 1
    assert m.settle("something-else") is True  # claimed, not confirmed: restart without it
    assert os.listdir(tmp_path) == []
    assert m.arm_start() == {}
    assert m.settle("gemini-cli") is True  # unclaimed, but a source reads it: restart with it
    assert "GEMINI_TELEMETRY_OUTFILE" in m.arm_start()
    assert m.settle("something-else") is False  # the third start is the last
    assert m.starts == MAX_STARTS and not m.measured
    assert os.listdir(tmp_path) == []


def flipping_agent(tmp_path: Path, names: list[str]) -> list[str]:
    """A wrapper that does not name any runtime and starts the scripted agent under the next of
    ``names`` (the last one repeats), recording each start."""
    (tmp_path / "names").write_text("\n".join(names) + "\n")
    wrapper = tmp_path / "agent.sh"
    agent = " ".join(scripted())
    wrapper.write_text(
        "#!/bin/sh\n"
        f"n=$(wc -l < {tmp_path}/starts 2>/dev/null || echo 0); echo start >> {tmp_path}/starts\n"
        f'name=$(sed -n "$((n + 1))p" {tmp_path}/names); [ -n "$name" ] || name=$(tail -n 1 {tmp_path}/names)\n'
        f'exec {agent} --name "$name"\n'
    )
    wrapper.chmod(0o755)
    return [str(wrapper)]


@pytest.mark.anyio
async def test_a_start_runs_the_runtime_at_most_three_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """gemini-cli unclaimed, another name under the source's settings, gemini-cli unclaimed again:
    the third start is kept, unmeasured, since it does not carry the source its handshake names."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    command = flipping_agent(tmp_path, ["gemini-cli", "scripted-x", "gemini-cli", "scripted-y"])
    caplog.set_level(logging.INFO, logger="remote_acp")
    async with open_session(str(tmp_path), fast_options(command)) as session:
        assert not session.measured
        assert session.info.agent_name == "gemini-cli"
        events: list[Any] = []
        assert (await session.run_turn("hi", events.append)).ok
        assert not [e for e in events if isinstance(e, TokenUsage)]
    assert (tmp_path / "starts").read_text().count("start") == MAX_STARTS
    restarts = [r for r in caplog.records if r.getMessage().startswith("restarting the agent")]
    assert [getattr(r, "agent_name", None) for r in restarts] == ["gemini-cli", "scripted-x"]
    assert os.listdir(tmp_path / "tmp") == []


@pytest.mark.anyio
async def test_a_wait_shorter_than_the_source_window_keeps_the_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """read_timeout_ms 1 s cannot let the source answer (its window is 6 s): the turn ends
    unmeasured, the source stays; the confirmed directory goes at session end."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    command = flipping_agent(tmp_path, ["gemini-cli"])
    async with open_session(str(tmp_path), fast_options(command, read_timeout_ms=1_000)) as session:
        assert session.measured
        for _ in range(2):
            events: list[Any] = []
            assert (await session.run_turn("hi", events.append)).ok
            assert not [e for e in events if isinstance(e, TokenUsage)]
            assert session.measured
        assert len(os.listdir(tmp_path / "tmp")) == 1
    assert os.listdir(tmp_path / "tmp") == []


@pytest.mark.parametrize(
    ("result", "figure"),
    [
        (
            {"stopReason": "end_turn", "_meta": {"quota": {"token_count": {"input_tokens": 5, "output_tokens": 2}}}},
            (5, 2),
        ),
        ({"stopReason": "end_turn"}, None),
        ({"_meta": {"quota": {"token_count": {"input_tokens": "5", "output_tokens": 2}}}}, None),
        ({"_meta": {"quota": {"token_count": {"input_tokens": -1, "output_tokens": 2}}}}, None),
        ({"_meta": {"quota": []}}, None),
        ("end_turn", None),
    ],
)
def test_the_vendor_figure_is_read_only_when_well_formed(result: Any, figure: tuple[int, int] | None) -> None:
    assert vendor_token_figure(result) == figure
