"""The pure parts of a reattach window's reconnects: the relay's end report, and when the next
reconnect attempt starts."""

from __future__ import annotations

import pytest

from remote_acp.targets.ssh.relink import next_attempt_in, parse_end


@pytest.mark.parametrize(
    ("line", "end"),
    [
        (b"RA-END out=0 rc=0", (0, 0)),
        (b"RA-END out=123456 rc=137\r", (123456, 137)),
        (b"RA-END out=9 rc=", (9, None)),
    ],
)
def test_the_relays_end_report_gives_the_last_offset_and_the_status(line: bytes, end: tuple[int, int | None]) -> None:
    assert parse_end(line) == end


@pytest.mark.parametrize(
    "line",
    [b"", b"RA-END", b"RA-END out=x rc=0", b"RA-END out=1 rc=0 extra", b" RA-END out=1 rc=0", b"ra-end out=1 rc=0"],
)
def test_another_line_is_no_end_report(line: bytes) -> None:
    assert parse_end(line) is None


def test_the_second_attempt_waits_for_a_login_then_attempts_come_often_then_less_often() -> None:
    # The first half second: the first attempt may simply be logging in.
    assert next_attempt_in(0.0) == 0.5
    assert next_attempt_in(0.2) == pytest.approx(0.3)
    # Then often, so a link that comes back meets a fresh attempt within a quarter second.
    assert {next_attempt_in(s) for s in (0.5, 3.0, 9.9)} == {0.25}
    # Then less often as the outage lasts: each attempt is an ssh here and a connection there.
    assert [next_attempt_in(s) for s in (10.0, 59.9, 60.0, 599.0, 600.0, 3600.0)] == [0.5, 0.5, 2.0, 2.0, 10.0, 10.0]
