"""The ready marker as a sans-I/O exchange: fed what a login prints, it says when it is ready.

No I/O and no process: bytes in, a decision out. What came before the marker is kept bounded
(the last 4 KiB to quote, the last 64 KiB for a gate), a marker split across reads is found,
and the generic reading of a marker that never came names the likely cause.
"""

from __future__ import annotations

from remote_acp.errors import Cause, ErrorKind, RemoteAcpError
from remote_acp.targets.launch import LaunchSpec, Ready
from remote_acp.targets.ssh.ready_marker import GATED_OUTPUT_KEPT, PRINTED_KEPT, ReadyMarker

MARKER = b"remote-acp-ready-1a"


def test_nothing_is_ready_before_the_marker_and_what_follows_it_is_protocol() -> None:
    watch = ReadyMarker(opening=b"s\n", marker=MARKER, reply=b"go\n").begin()
    assert watch.feed(b"Welcome\nremote-acp-rea") is None
    assert watch.printed == b"Welcome\nremote-acp-rea"
    assert watch.feed(b'dy-1a\n{"jsonrpc"') == Ready(b"go\n", b'{"jsonrpc"')
    assert watch.printed == b"Welcome\n"


def test_the_marker_must_be_a_whole_line() -> None:
    watch = ReadyMarker(opening=b"", marker=MARKER).begin()
    assert watch.feed(MARKER + b"-not-it\n") is None
    assert watch.feed(MARKER + b"\n") == Ready(b"", b"")


def test_what_came_before_is_kept_bounded() -> None:
    plain = ReadyMarker(opening=b"", marker=MARKER).begin()
    for _ in range(100):
        assert plain.feed(b"x" * 10_000) is None
    assert plain.printed == b"x" * PRINTED_KEPT
    seen: list[bytes] = []
    gated = ReadyMarker(opening=b"", marker=MARKER, gate=lambda printed: seen.append(printed)).begin()
    for _ in range(100):
        gated.feed(b"y" * 10_000)
    assert isinstance(gated.feed(b"report\n" + MARKER + b"\n"), Ready)
    assert len(seen[0]) == GATED_OUTPUT_KEPT and seen[0].endswith(b"yyyreport\n")


def test_a_gate_refuses_with_its_own_error() -> None:
    refusal = RemoteAcpError(ErrorKind.PORT_EXIT, "not this host")
    watch = ReadyMarker(opening=b"", marker=MARKER, gate=lambda _: refusal).begin()
    assert watch.feed(b"report\n" + MARKER + b"\n{}") is refusal


def test_each_launch_begins_afresh() -> None:
    marker = ReadyMarker(opening=b"", marker=MARKER)
    first = marker.begin()
    first.feed(b"half a login")
    assert marker.begin().printed == b""


def test_a_marker_that_never_came_names_the_likely_cause_unless_the_target_knows_better() -> None:
    generic = ReadyMarker(opening=b"", marker=MARKER).not_ready_error(800, stderr="", printed="Welcome")
    assert generic.kind is ErrorKind.RESPONSE_TIMEOUT and generic.cause is Cause.LOGIN_READS_STDIN
    assert generic.message.startswith("the remote side did not say it was ready within 800 ms")
    assert generic.detail == "it printed: Welcome"
    special = RemoteAcpError(ErrorKind.PORT_EXIT, "the connection never completed")

    def explain(bound_ms: int, *, stderr: str, printed: str) -> RemoteAcpError | None:
        return special if stderr else None

    marker = ReadyMarker(opening=b"", marker=MARKER, explain=explain)
    assert marker.not_ready_error(800, stderr="ssh: connecting", printed="") is special
    assert marker.not_ready_error(800, stderr="", printed="").cause is Cause.LOGIN_READS_STDIN


def test_the_spec_shows_a_ready_marker_to_code_that_speaks_the_start_by_hand() -> None:
    spec = LaunchSpec(argv=["ssh"], env={}, cwd=None, target="h", prelude=ReadyMarker(b"s\n", MARKER, b"go\n"))
    assert (spec.stdin_prefix, spec.ready_marker, spec.ready_reply) == (b"s\n", MARKER, b"go\n")
    bare = LaunchSpec(argv=["agent"], env={}, cwd=None, target="local")
    assert (bare.stdin_prefix, bare.ready_marker, bare.ready_reply) == (b"", b"", b"")
