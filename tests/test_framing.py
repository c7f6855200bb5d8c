"""LineFramer: newline framing with a bound, an OVERSIZED marker and resynchronization."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remote_acp.protocol.framing import DEFAULT_MAX_LINE_BYTES, OVERSIZED, LineFramer

if TYPE_CHECKING:
    from remote_acp.protocol.framing import FrameItem


def feed_all(framer: LineFramer, chunks: list[bytes], *, end: bool = True) -> list[FrameItem]:
    out: list[FrameItem] = []
    for chunk in chunks:
        out += framer.feed(chunk)
    if end:
        out += framer.end()
    return out


# -- construction -------------------------------------------------------------------------------


def test_default_bound_is_ten_mebibytes() -> None:
    assert DEFAULT_MAX_LINE_BYTES == 10 * 1024 * 1024
    assert LineFramer().max_line_bytes == 10 * 1024 * 1024


def test_custom_bound_is_reported() -> None:
    assert LineFramer(7).max_line_bytes == 7


@pytest.mark.parametrize("bound", [0, -1])
def test_bound_must_be_positive(bound: int) -> None:
    with pytest.raises(ValueError, match="^max_line_bytes must be positive$"):
        LineFramer(bound)


# -- table tests --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        pytest.param([b"a\n"], [b"a"], id="one-line"),
        pytest.param([b"a\nbb\nccc\n"], [b"a", b"bb", b"ccc"], id="three-lines-one-chunk"),
        pytest.param([b"he", b"ll", b"o\n"], [b"hello"], id="line-split-over-chunks"),
        pytest.param([b"ab\ncd", b"ef\ng"], [b"ab", b"cdef", b"g"], id="boundary-inside-chunks"),
        pytest.param([b"\n\n\n"], [], id="only-empty-lines"),
        pytest.param([b"\na\n\n\nb\n\n"], [b"a", b"b"], id="empty-lines-skipped"),
        pytest.param([b"a\r\n"], [b"a\r"], id="carriage-return-kept"),
        pytest.param([b"x", b"", b"y\n"], [b"xy"], id="empty-feed-in-between"),
        pytest.param([b"abc", b"\n"], [b"abc"], id="newline-alone-completes-line"),
        pytest.param([b"tail-without-newline"], [b"tail-without-newline"], id="end-returns-last-line"),
        pytest.param([b"a\n", b"b"], [b"a", b"b"], id="end-returns-unterminated-after-complete"),
        pytest.param([b"\xff\xfe\n"], [b"\xff\xfe"], id="bytes-passed-through-unchanged"),
    ],
)
def test_lines_within_bound(chunks: list[bytes], expected: list[bytes]) -> None:
    assert feed_all(LineFramer(32), chunks) == expected


def test_feed_of_nothing_yields_nothing() -> None:
    framer = LineFramer(4)
    assert framer.feed(b"") == []
    assert framer.buffered == 0


def test_feed_returns_only_completed_lines_and_buffers_the_rest() -> None:
    framer = LineFramer(16)
    assert framer.feed(b"one\ntw") == [b"one"]
    assert framer.buffered == 2
    assert framer.feed(b"o") == []
    assert framer.buffered == 3
    assert framer.feed(b"\n") == [b"two"]
    assert framer.buffered == 0


def test_line_of_exactly_the_bound_passes() -> None:
    framer = LineFramer(5)
    assert framer.feed(b"12345\n") == [b"12345"]


def test_line_of_exactly_the_bound_passes_when_assembled_from_pieces() -> None:
    framer = LineFramer(5)
    assert framer.feed(b"12") == []
    assert framer.feed(b"345") == []
    assert framer.buffered == 5
    assert framer.feed(b"\nok\n") == [b"12345", b"ok"]


def test_unterminated_line_of_exactly_the_bound_comes_out_at_end() -> None:
    framer = LineFramer(5)
    assert framer.feed(b"12345") == []
    assert framer.end() == [b"12345"]


def test_line_one_over_the_bound_in_one_chunk_is_oversized() -> None:
    framer = LineFramer(5)
    assert framer.feed(b"123456\nok\n") == [OVERSIZED, b"ok"]
    assert framer.buffered == 0


def test_oversized_is_reported_as_soon_as_pending_bytes_cross_the_bound() -> None:
    framer = LineFramer(5)
    assert framer.feed(b"123") == []
    assert framer.feed(b"456") == [OVERSIZED]
    assert framer.buffered == 0


def test_rest_of_an_oversized_line_is_discarded_until_the_newline() -> None:
    framer = LineFramer(5)
    assert framer.feed(b"1234567") == [OVERSIZED]
    assert framer.feed(b"more bytes of the same line") == []
    assert framer.buffered == 0
    assert framer.feed(b"still more") == []
    assert framer.feed(b"...\nnext\n") == [b"next"]


def test_completing_pending_bytes_past_the_bound_is_oversized() -> None:
    # The pending part fits; the piece before the newline pushes it over.
    framer = LineFramer(5)
    assert framer.feed(b"abc") == []
    assert framer.feed(b"def\nghi\n") == [OVERSIZED, b"ghi"]


def test_oversized_line_between_good_lines_keeps_its_position() -> None:
    framer = LineFramer(4)
    assert framer.feed(b"ab\n" + b"x" * 50 + b"\ncd\n") == [b"ab", OVERSIZED, b"cd"]


def test_two_consecutive_oversized_lines_yield_two_markers() -> None:
    framer = LineFramer(3)
    assert framer.feed(b"aaaa\nbbbb\nc\n") == [OVERSIZED, OVERSIZED, b"c"]


def test_two_consecutive_oversized_lines_across_chunks_yield_two_markers() -> None:
    framer = LineFramer(3)
    assert feed_all(framer, [b"aaaa", b"a\nbb", b"bb", b"\nc\n"]) == [OVERSIZED, OVERSIZED, b"c"]


def test_oversized_line_then_a_line_starting_in_the_same_chunk() -> None:
    framer = LineFramer(3)
    assert framer.feed(b"aaaaaa") == [OVERSIZED]
    assert framer.feed(b"aa\nxy") == []
    assert framer.buffered == 2
    assert framer.end() == [b"xy"]


def test_end_during_an_oversized_line_yields_nothing_more() -> None:
    framer = LineFramer(3)
    assert framer.feed(b"abcdef") == [OVERSIZED]
    assert framer.end() == []


def test_end_with_nothing_pending_yields_nothing() -> None:
    framer = LineFramer(3)
    assert framer.feed(b"ab\n") == [b"ab"]
    assert framer.end() == []


def test_end_resets_the_framer() -> None:
    framer = LineFramer(3)
    assert framer.feed(b"abcdef") == [OVERSIZED]
    assert framer.end() == []
    # After end() a new stream starts clean: the discarding state is gone.
    assert framer.feed(b"ok\n") == [b"ok"]
    assert framer.feed(b"xy") == []
    assert framer.end() == [b"xy"]
    assert framer.buffered == 0
    assert framer.end() == []


def test_buffered_never_exceeds_bound_while_a_long_line_streams() -> None:
    framer = LineFramer(8)
    for _ in range(100):
        framer.feed(b"0123456789")
        assert framer.buffered <= 8
    assert framer.feed(b"\nafter\n") == [b"after"]


# -- properties ---------------------------------------------------------------------------------

_NO_NEWLINE = st.binary(max_size=40).map(lambda b: b.replace(b"\n", b""))


@st.composite
def chunked(draw: st.DrawFn, data: bytes) -> list[bytes]:
    """Split ``data`` at arbitrary points (empty chunks included)."""
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=12)))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


@st.composite
def good_stream(draw: st.DrawFn) -> tuple[int, list[bytes], list[bytes], bool]:
    bound = draw(st.integers(1, 40))
    lines = draw(st.lists(_NO_NEWLINE.map(lambda b: b[:bound]), max_size=20))
    trailing_newline = draw(st.booleans())
    data = b"\n".join(lines) + (b"\n" if trailing_newline else b"")
    return bound, lines, draw(chunked(data)), trailing_newline


@given(good_stream())
@settings(max_examples=250, deadline=None)
def test_property_lines_within_bound_come_out_in_order(
    case: tuple[int, list[bytes], list[bytes], bool],
) -> None:
    bound, lines, chunks, _ = case
    framer = LineFramer(bound)
    out: list[FrameItem] = []
    for chunk in chunks:
        out += framer.feed(chunk)
        assert framer.buffered <= bound
    out += framer.end()
    assert out == [line for line in lines if line]
    assert framer.buffered == 0


@st.composite
def mixed_stream(draw: st.DrawFn) -> tuple[int, list[bytes | None], list[bytes]]:
    """Lines, some over the bound; ``None`` in the expectation marks an over-long line."""
    bound = draw(st.integers(1, 24))
    items = draw(
        st.lists(
            st.one_of(
                _NO_NEWLINE.map(lambda b: b[:bound]),
                st.binary(min_size=bound + 1, max_size=3 * bound + 20).map(lambda b: b.replace(b"\n", b"x")),
            ),
            max_size=16,
        )
    )
    trailing_newline = draw(st.booleans())
    data = b"\n".join(items) + (b"\n" if trailing_newline else b"")
    expected: list[bytes | None] = [None if len(item) > bound else item for item in items if item]
    return bound, expected, draw(chunked(data))


@given(mixed_stream())
@settings(max_examples=250, deadline=None)
def test_property_oversized_lines_yield_one_marker_each_and_framing_resynchronizes(
    case: tuple[int, list[bytes | None], list[bytes]],
) -> None:
    bound, expected, chunks = case
    framer = LineFramer(bound)
    out: list[FrameItem] = []
    for chunk in chunks:
        out += framer.feed(chunk)
        assert framer.buffered <= bound
    out += framer.end()
    assert framer.buffered == 0
    assert out == [OVERSIZED if item is None else item for item in expected]
