"""A session's handle as the history keeps it and ``attach`` and ``sessions`` read it back:
untrusted until checked, its secret never listed, its window's state told from the time."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from typing import TYPE_CHECKING, Any

import click
import pytest

from remote_acp.cli.attach_command import recorded_handle
from remote_acp.cli.history import SessionHistory, SessionRecord
from remote_acp.cli.sessions import reattach_state
from remote_acp.session.handle import SessionHandle
from remote_acp.targets.process.tree import boot_id, process_ref

if TYPE_CHECKING:
    from pathlib import Path

GOOD: dict[str, Any] = {
    "host": "build1",
    "relay_id": "a1b2c3",
    "secret": "s3cr3t-secret-value-0123",
    "session_id": "sess-9",
    "workspace": "/srv/ws",
    "window_s": 60,
}


def test_a_handle_round_trips_through_json_and_hides_its_secret_from_repr() -> None:
    handle = SessionHandle(**GOOD, prompt_id=7, config_file="/etc/ssh/cfg")
    assert SessionHandle.from_json(json.loads(json.dumps(handle.to_json()))) == handle
    assert GOOD["secret"] not in repr(handle)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"relay_id": "a/../b"}, "relay id"),
        ({"relay_id": ""}, "relay id"),
        ({"secret": "short"}, "secret"),
        ({"secret": "has a space in it ok"}, "secret"),
        ({"workspace": "relative"}, "absolute workspace"),
        ({"host": ""}, "names a host"),
        ({"window_s": 0}, "window"),
        ({"window_s": True}, "window"),
        ({"prompt_id": -1}, "prompt id"),
        ({"prompt_id": "7"}, "prompt id"),
        ({"close_method": "rm -rf"}, "close method"),
        ({"session_id": "x" * 5000}, "session_id"),
        ({"config_file": 5}, "ssh config"),
        ({"detached_at": "yesterday"}, "detach time"),
    ],
)
def test_a_handle_read_back_is_checked_whole(change: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        SessionHandle.from_json({**GOOD, **change})


def test_a_handle_missing_a_field_or_not_an_object_is_refused() -> None:
    with pytest.raises(ValueError, match="lacks a field"):
        SessionHandle.from_json({k: v for k, v in GOOD.items() if k != "secret"})
    with pytest.raises(ValueError, match="JSON object"):
        SessionHandle.from_json([GOOD])


def test_the_time_left_counts_from_the_detach() -> None:
    handle = SessionHandle(**GOOD)
    assert handle.seconds_left(now=100.0) is None
    detached = handle.detached(at=100.0)
    assert detached.seconds_left(now=130.0) == 30.0
    assert detached.seconds_left(now=170.0) == -10.0


def record(handle: dict[str, Any] | None, *, session_id: str = "sess-9", outcome: str = "running") -> SessionRecord:
    return SessionRecord(
        session_id=session_id,
        agent="qwen --acp",
        target="build1",
        workspace="/srv/ws",
        when="2026-12-04T20:00:00Z",
        outcome=outcome,
        handle=handle,
    )


def test_the_listing_says_attached_detached_or_expired_without_the_secret() -> None:
    attached = reattach_state(record(GOOD), now=1000.0)
    assert attached is not None and attached["state"] == "attached"
    detached = reattach_state(record({**GOOD, "detached_at": 990.0}), now=1000.0)
    assert detached is not None and (detached["state"], detached["seconds_left"]) == ("detached", 50)
    assert "remote-acp attach a1b2c3" in detached["says"]
    expired = reattach_state(record({**GOOD, "detached_at": 900.0}), now=1000.0)
    assert expired is not None and expired["state"] == "expired" and "40 s ago" in expired["says"]
    for state in (attached, detached, expired):
        assert GOOD["secret"] not in json.dumps(state)
    assert reattach_state(record(None), now=0.0) is None
    assert reattach_state(record({**GOOD, "relay_id": "../x"}), now=0.0) is None  # unreadable: not listed


@pytest.mark.process
def test_an_attached_session_is_told_by_whether_the_run_that_recorded_it_still_runs() -> None:
    me, boot = process_ref(os.getpid()), boot_id()
    assert me is not None and boot is not None
    held = reattach_state(dataclasses.replace(record(GOOD), run=f"{me.pid} {me.start_time} {boot}"), now=0.0)
    assert held is not None and (held["state"], held["run_pid"]) == ("attached", me.pid)
    assert held["says"] == f"attached to its run (pid {me.pid})"
    # A run killed with its session kept: gone, and so is a later process given its pid
    child = subprocess.Popen(["sleep", "60"])
    ref = process_ref(child.pid)
    child.kill()
    child.wait()
    assert ref is not None
    for run in (f"{ref.pid} {ref.start_time} {boot}", f"{me.pid} {me.start_time + 1} {boot}"):
        gone = reattach_state(dataclasses.replace(record(GOOD), run=run), now=0.0)
        assert gone is not None and gone["state"] == "run_gone", run
        assert "is gone without detaching" in gone["says"] and "remote-acp attach a1b2c3" in gone["says"]
    # A record without the run (an older one), or with one that is not a pid, start time and boot
    unknown_runs: tuple[str | None, ...] = (
        None,
        "",
        "12",
        "x 1",
        "1 2 3",
        "1" * 11 + " 5 " + boot,
        f"{me.pid} -{me.start_time} {boot}",
        # this very process, named without its boot, or with another one: another machine's
        # process, or one from before a reboot, cannot be told from here
        f"{me.pid} {me.start_time}",
        f"{me.pid} {me.start_time} 0123-other-boot",
    )
    for unknown_run in unknown_runs:
        unknown = reattach_state(dataclasses.replace(record(GOOD), run=unknown_run), now=0.0)
        assert unknown is not None and unknown["state"] == "attached" and "run_pid" not in unknown, unknown_run


def test_a_record_with_a_handle_round_trips_through_the_history(tmp_path: Path) -> None:
    history = SessionHistory(tmp_path)
    history.add(record(GOOD))
    (read,) = history.records()
    assert read.handle == GOOD
    assert (tmp_path / "sessions.jsonl").stat().st_mode & 0o077 == 0  # the secret is the user's only


def test_attach_finds_a_session_by_its_id_or_relay_id_and_refuses_an_ended_one(tmp_path: Path) -> None:
    history = SessionHistory(tmp_path)
    history.add(record(GOOD))
    assert recorded_handle(history, "sess-9")[1].relay_id == "a1b2c3"
    assert recorded_handle(history, "a1b2c3")[1].session_id == "sess-9"
    with pytest.raises(click.UsageError, match="session nope is not in the session history"):
        recorded_handle(history, "nope")
    history.add(record(None, outcome="turn_completed"))  # the run ended it
    with pytest.raises(click.UsageError, match="has no reattach handle"):
        recorded_handle(history, "a1b2c3")


def test_attach_refuses_a_handle_the_history_holds_damaged(tmp_path: Path) -> None:
    history = SessionHistory(tmp_path)
    history.add(record({**GOOD, "window_s": -5}))
    with pytest.raises(click.UsageError, match="handle of sess-9 cannot be used: .*window"):
        recorded_handle(history, "sess-9")
