"""The controller's side of the reattach link protocol, without I/O: offsets, frames, resends, errors."""

from __future__ import annotations

import pytest

from remote_acp.errors import Cause, ErrorKind, RemoteAcpError
from remote_acp.targets.ssh.relay.attach import (
    EXIT_ATTACHED_ELSEWHERE,
    EXIT_BAD_REQUEST,
    EXIT_NO_SESSION,
    EXIT_OFFSET_GONE,
    EXIT_WRONG_SECRET,
)
from remote_acp.targets.ssh.relay.link import AttachReply, Link, parse_attach_reply, refusal_error
from remote_acp.targets.ssh.relay.start import EXIT_BAD_START, EXIT_NO_WINDOW
from remote_acp.targets.ssh.script import EXIT_AT_CAPACITY


def attached(link: Link, out: int, host_input: int) -> bytes:
    return link.attached(AttachReply(out, host_input))


def test_the_requests_carry_the_offsets_and_the_secret() -> None:
    link = Link("abc123", "s3cret")
    assert link.start_request() == b"abc123 s3cret\n"
    attached(link, 0, 0)
    link.received_bytes(b"hello")
    link.send(b"in")
    assert link.attach_request() == b"abc123 5 2 takeover s3cret\n"
    assert link.attach_request(takeover=False) == b"abc123 5 2 attach s3cret\n"


@pytest.mark.parametrize("bad", ["", "a b", "ab-c", "ü"])
def test_a_session_id_is_letters_and_digits(bad: str) -> None:
    with pytest.raises(ValueError, match="session id"):
        Link(bad, "secret")


def test_a_secret_is_one_printable_word() -> None:
    with pytest.raises(ValueError, match="secret"):
        Link("abc", "two words")


def test_the_header_is_parsed_and_anything_else_refused() -> None:
    assert parse_attach_reply(b"RA-ATTACHED out=12 in=3") == AttachReply(12, 3)
    assert parse_attach_reply("RA-ATTACHED out=0 in=0\n") == AttachReply(0, 0)
    for line in (b"RA-REFUSED wrong secret", b"RA-ATTACHED out=1", b"RA-ATTACHED out=-1 in=0", b"hello"):
        with pytest.raises(ValueError):
            parse_attach_reply(line)


def test_output_is_counted_and_what_the_caller_has_is_dropped_after_a_reattach() -> None:
    link = Link("s1", "k")
    attached(link, 0, 0)
    assert link.received_bytes(b"abc") == b"abc"
    assert link.received_bytes(b"def") == b"def"
    link.detached()
    # the host replays from an older offset (the caller asked for 6, the host may start lower)
    attached(link, 4, 0)
    assert link.received_bytes(b"e") == b""
    assert link.received_bytes(b"fgh") == b"gh"
    assert link.received == 8


def test_output_past_what_the_caller_has_is_a_loss() -> None:
    link = Link("s1", "k")
    attached(link, 0, 0)
    link.received_bytes(b"ab")
    with pytest.raises(RemoteAcpError, match="past the 2 bytes"):
        attached(link, 3, 0)


def test_output_with_no_connection_is_a_mistake() -> None:
    link = Link("s1", "k")
    with pytest.raises(RuntimeError):
        link.received_bytes(b"x")


def test_acks_come_every_interval_or_when_forced() -> None:
    link = Link("s1", "k", ack_every=4)
    attached(link, 0, 0)
    link.received_bytes(b"abc")
    assert link.ack() == b""
    link.received_bytes(b"d")
    assert link.ack() == b"A 4\n"
    assert link.ack(force=True) == b""
    link.received_bytes(b"e")
    assert link.ack(force=True) == b"A 5\n"


def test_an_ack_can_stop_at_a_line_end_and_never_goes_back() -> None:
    link = Link("s1", "k", ack_every=4)
    attached(link, 0, 0)
    link.received_bytes(b"line one\nhalf")
    assert link.ack(upto=9) == b"A 9\n"
    assert link.ack(upto=5, force=True) == b""  # below what was acknowledged
    assert link.ack(upto=99, force=True) == b"A 13\n"  # never past what was received


def test_a_new_controller_resumes_from_the_hosts_counts() -> None:
    link = Link("s1", "k")
    assert link.resume_request() == b"s1 - - attach k\n"
    link.resumed(parse_attach_reply("RA-ATTACHED out=700 in=42"))
    assert (link.received, link.sent, link.acked) == (700, 42, 700)
    assert link.received_bytes(b"abc") == b"abc"
    assert link.received == 703
    assert link.send(b"xy") == b"D 2\nxy"
    assert link.attach_request() == b"s1 703 44 takeover k\n"


def test_only_a_fresh_link_resumes() -> None:
    link = Link("s1", "k")
    link.send(b"x")
    with pytest.raises(RuntimeError):
        link.resumed(parse_attach_reply("RA-ATTACHED out=0 in=0"))


def test_the_end_frame_is_one_letter() -> None:
    assert Link.end_session() == b"X\n"


def test_input_the_host_lacks_is_resent_once_and_the_rest_is_forgotten() -> None:
    link = Link("s1", "k")
    assert attached(link, 0, 0) == b""
    assert link.send(b"hello ") == b"D 6\nhello "
    assert link.send(b"world") == b"D 5\nworld"
    link.detached()
    # the host got "hello wo" (a frame cut in the middle)
    assert attached(link, 0, 8) == b"D 3\nrld"
    assert link.unconfirmed == 3
    link.detached()
    assert attached(link, 0, 11) == b""
    assert link.unconfirmed == 0


def test_closed_input_is_closed_again_after_a_reattach() -> None:
    link = Link("s1", "k")
    attached(link, 0, 0)
    link.send(b"x")
    assert link.close_input() == b"E\n"
    with pytest.raises(RuntimeError):
        link.send(b"y")
    link.detached()
    assert attached(link, 0, 0) == b"D 1\nxE\n"


def test_the_input_kept_is_bounded_and_a_host_behind_it_is_a_loss() -> None:
    link = Link("s1", "k", input_bound=10)
    attached(link, 0, 0)
    link.send(b"0123456789")
    link.send(b"abcde")
    assert link.unconfirmed == 10
    link.detached()
    with pytest.raises(RemoteAcpError, match="keeps only those from 5 on") as lost:
        attached(link, 0, 4)
    assert lost.value.kind is ErrorKind.PORT_EXIT
    assert attached(link, 0, 5) == b"D 10\n56789abcde"


def test_a_host_with_more_input_than_sent_is_a_loss() -> None:
    link = Link("s1", "k")
    with pytest.raises(RemoteAcpError, match="more than the 0 sent"):
        attached(link, 0, 1)


@pytest.mark.parametrize(
    ("status", "start", "cause"),
    [
        (EXIT_NO_SESSION, False, Cause.SESSION_EXPIRED),
        (EXIT_WRONG_SECRET, False, Cause.NOT_OWNER),
        (EXIT_ATTACHED_ELSEWHERE, False, Cause.ATTACHED_ELSEWHERE),
        (EXIT_OFFSET_GONE, False, Cause.OFFSET_LOST),
        (EXIT_BAD_REQUEST, False, Cause.PROTOCOL_VIOLATION),
        (EXIT_NO_WINDOW, True, Cause.NO_REATTACH_WINDOW),
        (EXIT_AT_CAPACITY, True, Cause.AT_CAPACITY),
        (EXIT_BAD_START, True, Cause.PROTOCOL_VIOLATION),
    ],
)
def test_refusals_map_to_causes(status: int, start: bool, cause: Cause) -> None:
    error = refusal_error(status, "RA-REFUSED why\n", host="h1", start=start)
    assert error.cause is cause
    assert error.kind is ErrorKind.PORT_EXIT
    assert error.facts.exit_status == status and error.facts.host == "h1"
    assert error.detail == "RA-REFUSED why"


def test_an_unknown_status_is_a_failed_link() -> None:
    error = refusal_error(255, "ssh: connection closed")
    assert error.cause is Cause.AGENT_LOST
    assert "failed" in error.message
    assert refusal_error(None, "").facts.exit_status is None
