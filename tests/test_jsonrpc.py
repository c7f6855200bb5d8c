"""JsonRpcPeer: encoding what we send and classifying what the agent sends, without I/O."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remote_acp.protocol.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    MAX_NESTING,
    METHOD_NOT_FOUND,
    JsonRpcPeer,
    MalformedLine,
    Request,
    Response,
    RpcErrorBody,
    RpcNotification,
    StrayResponse,
    _loads,
    encode,
    nesting_exceeds,
)


def line(message: Any) -> bytes:
    return json.dumps(message).encode()


def test_error_code_constants() -> None:
    assert METHOD_NOT_FOUND == -32601
    assert INVALID_PARAMS == -32602
    assert INTERNAL_ERROR == -32603


# -- encoding -----------------------------------------------------------------------------------


def test_encode_is_compact_and_newline_terminated() -> None:
    assert encode({"a": 1, "b": [1, 2], "c": {"d": None}}) == b'{"a":1,"b":[1,2],"c":{"d":null}}\n'


def test_encode_escapes_newlines_inside_strings() -> None:
    out = encode({"text": "one\ntwo\r\n"})
    assert out == b'{"text":"one\\ntwo\\r\\n"}\n'
    assert out.count(b"\n") == 1


def test_encode_escapes_non_ascii_so_the_line_is_pure_ascii() -> None:
    out = encode({"text": "café ✓ 😀"})
    assert out == b'{"text":"caf\\u00e9 \\u2713 \\ud83d\\ude00"}\n'
    assert out.isascii()
    assert json.loads(out) == {"text": "café ✓ 😀"}


def test_requests_get_increasing_integer_ids_starting_at_one() -> None:
    peer = JsonRpcPeer()
    first_id, first = peer.request("initialize", {"protocolVersion": 1})
    second_id, second = peer.request("session/new", {"cwd": "/w", "mcpServers": []})
    assert (first_id, second_id) == (1, 2)
    assert first == b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
    assert second == b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}\n'
    assert peer.pending_outgoing == {1: "initialize", 2: "session/new"}


def test_request_without_params_has_no_params_member() -> None:
    peer = JsonRpcPeer()
    request_id, data = peer.request("ping")
    assert request_id == 1
    assert data == b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'


def test_request_with_empty_params_keeps_them() -> None:
    _, data = JsonRpcPeer().request("x", {})
    assert data == b'{"jsonrpc":"2.0","id":1,"method":"x","params":{}}\n'


def test_notify_has_no_id_and_is_not_tracked() -> None:
    peer = JsonRpcPeer()
    assert peer.notify("session/cancel", {"sessionId": "s1"}) == (
        b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}\n'
    )
    assert peer.notify("bare") == b'{"jsonrpc":"2.0","method":"bare"}\n'
    assert peer.pending_outgoing == {}
    # Notifications do not consume request ids.
    assert peer.request("x")[0] == 1


def test_respond_echoes_the_id_verbatim() -> None:
    peer = JsonRpcPeer()
    assert peer.respond(0, {"outcome": {"outcome": "cancelled"}}) == (
        b'{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"cancelled"}}}\n'
    )
    assert peer.respond("abc-7", None) == b'{"jsonrpc":"2.0","id":"abc-7","result":null}\n'


def test_respond_error_has_code_and_message() -> None:
    peer = JsonRpcPeer()
    assert peer.respond_error(0, METHOD_NOT_FOUND, "method not found: x/y") == (
        b'{"jsonrpc":"2.0","id":0,"error":{"code":-32601,"message":"method not found: x/y"}}\n'
    )
    assert peer.respond_error("r1", INTERNAL_ERROR, "boom") == (
        b'{"jsonrpc":"2.0","id":"r1","error":{"code":-32603,"message":"boom"}}\n'
    )


# -- receiving requests and notifications ------------------------------------------------------


def test_agent_request_with_id_zero() -> None:
    peer = JsonRpcPeer()
    got = peer.receive(line({"jsonrpc": "2.0", "id": 0, "method": "session/request_permission", "params": {"a": 1}}))
    assert got == Request(0, "session/request_permission", {"a": 1})
    assert peer.open_incoming == {0: "session/request_permission"}
    peer.respond(0, {"outcome": "x"})
    assert peer.open_incoming == {}


def test_agent_request_with_string_id() -> None:
    peer = JsonRpcPeer()
    got = peer.receive(line({"jsonrpc": "2.0", "id": "req-1", "method": "fs/read_text_file"}))
    assert got == Request("req-1", "fs/read_text_file", None)
    assert peer.open_incoming == {"req-1": "fs/read_text_file"}
    peer.respond_error("req-1", METHOD_NOT_FOUND, "no")
    assert peer.open_incoming == {}


def test_agent_request_params_are_passed_through_untouched() -> None:
    params = [1, "two", {"three": 3}]
    got = JsonRpcPeer().receive(line({"jsonrpc": "2.0", "id": 5, "method": "_vendor/x", "params": params}))
    assert got == Request(5, "_vendor/x", params)


def test_notification() -> None:
    peer = JsonRpcPeer()
    params = {"sessionId": "s1", "update": {"sessionUpdate": "plan", "_meta": {"x": 1}}, "extra": True}
    got = peer.receive(line({"jsonrpc": "2.0", "method": "session/update", "params": params}))
    assert got == RpcNotification("session/update", params)
    assert peer.open_incoming == {}


def test_notification_without_params() -> None:
    assert JsonRpcPeer().receive(b'{"jsonrpc":"2.0","method":"x"}') == RpcNotification("x", None)


def test_notification_with_null_id_is_a_request_with_bad_id() -> None:
    got = JsonRpcPeer().receive(b'{"jsonrpc":"2.0","id":null,"method":"x"}')
    assert got == MalformedLine(
        "the request id is neither a number nor a string", '{"jsonrpc":"2.0","id":null,"method":"x"}'
    )


@pytest.mark.parametrize("bad_id", ["true", "false", "null", "1.5", "[1]", '{"a":1}'])
def test_request_with_an_invalid_id_is_malformed(bad_id: str) -> None:
    peer = JsonRpcPeer()
    raw = f'{{"jsonrpc":"2.0","id":{bad_id},"method":"m"}}'.encode()
    assert peer.receive(raw) == MalformedLine("the request id is neither a number nor a string", raw.decode())
    assert peer.open_incoming == {}


@pytest.mark.parametrize("method", ["1", "null", "[]", '{"x":1}', "true"])
def test_method_that_is_not_a_string_is_malformed(method: str) -> None:
    raw = f'{{"jsonrpc":"2.0","id":1,"method":{method}}}'.encode()
    got = JsonRpcPeer().receive(raw)
    if method == "null":
        # A null method is no method: with neither result nor error this is no message at all.
        assert got == MalformedLine("the object is neither a request, a notification nor a response", raw.decode())
    else:
        assert got == MalformedLine("the method is not a string", raw.decode())


# -- malformed lines ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [b"not json", b"{", b'{"jsonrpc":"2.0",}', b"\xff\xfe garbage", b"", b"   "],
)
def test_line_that_is_not_json_is_malformed(raw: bytes) -> None:
    assert JsonRpcPeer().receive(raw) == MalformedLine("the line is not valid JSON", raw.decode("utf-8", "replace"))


@pytest.mark.parametrize("raw", [b"[]", b"[1,2]", b"42", b'"text"', b"null", b"true"])
def test_json_that_is_not_an_object_is_malformed(raw: bytes) -> None:
    assert JsonRpcPeer().receive(raw) == MalformedLine("the line is not a JSON-RPC object", raw.decode())


@pytest.mark.parametrize(
    "raw",
    [
        b"{}",
        b'{"jsonrpc":"2.0"}',
        b'{"jsonrpc":"2.0","id":1}',
        b'{"jsonrpc":"2.0","result":1}',
        b'{"params":{}}',
    ],
)
def test_object_that_is_no_message_is_malformed(raw: bytes) -> None:
    assert JsonRpcPeer().receive(raw) == MalformedLine(
        "the object is neither a request, a notification nor a response", raw.decode()
    )


def test_malformed_excerpt_is_bounded_to_200_characters() -> None:
    got = JsonRpcPeer().receive(b"x" * 5000)
    assert got == MalformedLine("the line is not valid JSON", "x" * 200, cut=True)


def test_malformed_excerpt_replaces_invalid_utf8() -> None:
    got = JsonRpcPeer().receive(b"ab\xffcd")
    assert got == MalformedLine("the line is not valid JSON", "ab\ufffdcd")


def test_connection_goes_on_after_a_malformed_line() -> None:
    peer = JsonRpcPeer()
    request_id, _ = peer.request("initialize")
    assert isinstance(peer.receive(b"garbage"), MalformedLine)
    assert peer.receive(line({"jsonrpc": "2.0", "id": request_id, "result": {"ok": True}})) == Response(
        1, "initialize", result={"ok": True}
    )


@pytest.mark.parametrize("raw", [b"[" * 100_000, b'{"a":' * 100_000], ids=["arrays", "objects"])
def test_deeply_nested_line_is_malformed_not_an_exception(raw: bytes) -> None:
    assert JsonRpcPeer().receive(raw) == MalformedLine(
        "the line nests deeper than 64 levels", raw[:200].decode(), cut=True
    )


def nested(depth: int, leaf: Any = "leaf") -> Any:
    for level in range(depth):
        leaf = {"n": leaf} if level % 2 else [leaf]
    return leaf


@pytest.mark.parametrize("depth", [62, 63])
def test_nesting_up_to_the_bound_parses(depth: int) -> None:
    # the message object itself is one level more than its params
    params = nested(depth)
    got = JsonRpcPeer().receive(line({"jsonrpc": "2.0", "method": "_vendor/deep", "params": params}))
    assert got == RpcNotification("_vendor/deep", params)


@pytest.mark.parametrize("depth", [64, 200, 900])
def test_nesting_past_the_bound_is_refused_before_parsing(depth: int) -> None:
    got = JsonRpcPeer().receive(line({"jsonrpc": "2.0", "method": "_vendor/deep", "params": nested(depth)}))
    assert isinstance(got, MalformedLine) and got.reason == f"the line nests deeper than {MAX_NESTING} levels"


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    text = '"[{' * 500 + '\\"]}' * 3
    params = {"text": text, "list": [[1], [2]] * 300}
    assert JsonRpcPeer().receive(line({"jsonrpc": "2.0", "method": "m", "params": params})) == RpcNotification(
        "m", params
    )


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(x) for x in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(x) for x in value.values()), default=0)
    return 0


_JSON = st.recursive(
    st.integers() | st.text(alphabet='[]{}"\\ab', max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='[]{}"a', max_size=3), inner, max_size=3)
    ),
    max_leaves=60,
)


@given(_JSON)
def test_nesting_check_agrees_with_the_true_depth(value: Any) -> None:
    raw = json.dumps(value).encode()
    for limit in (0, 1, 2, 3, 5):
        assert nesting_exceeds(raw, limit) is (_depth(value) > limit)


def test_an_unreadable_line_naming_a_pending_request_says_so() -> None:
    peer = JsonRpcPeer()
    prompt, _ = peer.request("session/prompt")
    deep = b'{"jsonrpc":"2.0","id":%d,"result":{"stopReason":' % prompt + b"[" * 70 + b"]" * 70 + b"}}"
    got = peer.receive(deep)
    assert isinstance(got, MalformedLine) and got.reply_to == prompt
    for noise in (b'{"jsonrpc":"2.0","id":99,"result":broken', b"not json at all"):
        other = peer.receive(noise)
        assert isinstance(other, MalformedLine) and other.reply_to is None


# -- responses ----------------------------------------------------------------------------------


def test_response_is_correlated_by_id_and_carries_the_method() -> None:
    peer = JsonRpcPeer()
    peer.request("initialize")
    peer.request("session/new")
    got = peer.receive(line({"jsonrpc": "2.0", "id": 2, "result": {"sessionId": "s1"}}))
    assert got == Response(2, "session/new", result={"sessionId": "s1"}, error=None)
    assert peer.pending_outgoing == {1: "initialize"}


def test_response_with_null_result() -> None:
    peer = JsonRpcPeer()
    peer.request("session/cancel")
    assert peer.receive(b'{"jsonrpc":"2.0","id":1,"result":null}') == Response(1, "session/cancel", result=None)


def test_response_with_null_error_and_a_result_is_a_success() -> None:
    peer = JsonRpcPeer()
    peer.request("x")
    assert peer.receive(b'{"jsonrpc":"2.0","id":1,"result":7,"error":null}') == Response(1, "x", result=7)


def test_error_response() -> None:
    peer = JsonRpcPeer()
    peer.request("session/new")
    got = peer.receive(
        line({"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "Authentication required"}})
    )
    assert got == Response(1, "session/new", result=None, error=RpcErrorBody(-32000, "Authentication required"))
    assert peer.pending_outgoing == {}


def test_error_response_keeps_data() -> None:
    peer = JsonRpcPeer()
    peer.request("initialize")
    got = peer.receive(
        line({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "bad", "data": {"field": "x"}}})
    )
    assert got == Response(1, "initialize", error=RpcErrorBody(-32602, "bad", {"field": "x"}))


@pytest.mark.parametrize("message", [None, 5, ["a"]])
def test_error_response_with_a_non_string_message_gets_empty_text(message: Any) -> None:
    peer = JsonRpcPeer()
    peer.request("m")
    got = peer.receive(line({"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": message}}))
    assert got == Response(1, "m", error=RpcErrorBody(-1, ""))


def test_error_response_without_a_message_gets_empty_text() -> None:
    peer = JsonRpcPeer()
    peer.request("m")
    assert peer.receive(b'{"jsonrpc":"2.0","id":1,"error":{"code":-5}}') == Response(1, "m", error=RpcErrorBody(-5, ""))


@pytest.mark.parametrize(
    "error",
    ["boom", 42, [1], {"message": "no code"}, {"code": "1", "message": "x"}, {"code": True}, {"code": -1.0}],
)
def test_error_response_without_an_integer_code(error: Any) -> None:
    peer = JsonRpcPeer()
    peer.request("m")
    got = peer.receive(line({"jsonrpc": "2.0", "id": 1, "error": error}))
    assert got == Response(1, "m", error=RpcErrorBody(0, "the agent sent an error without a numeric code", error))
    assert peer.pending_outgoing == {}


def test_second_response_to_the_same_request_is_stray() -> None:
    peer = JsonRpcPeer()
    peer.request("x")
    raw = b'{"jsonrpc":"2.0","id":1,"result":1}'
    assert peer.receive(raw) == Response(1, "x", result=1)
    assert peer.receive(raw) == StrayResponse(1)


@pytest.mark.parametrize(
    ("raw", "stray_id"),
    [
        (b'{"jsonrpc":"2.0","id":99,"result":1}', 99),
        (b'{"jsonrpc":"2.0","id":"1","result":1}', "1"),
        (b'{"jsonrpc":"2.0","id":true,"result":1}', True),
        (b'{"jsonrpc":"2.0","id":1.0,"result":1}', 1.0),
        (b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}', None),
        (b'{"jsonrpc":"2.0","id":[1],"result":1}', [1]),
    ],
)
def test_response_to_no_pending_request_is_stray_and_keeps_ours_pending(raw: bytes, stray_id: Any) -> None:
    peer = JsonRpcPeer()
    peer.request("initialize")
    got = peer.receive(raw)
    assert got == StrayResponse(stray_id)
    assert type(got.id) is type(stray_id)
    assert peer.pending_outgoing == {1: "initialize"}


def test_forget_makes_a_late_response_stray() -> None:
    peer = JsonRpcPeer()
    request_id, _ = peer.request("session/prompt")
    peer.forget(request_id)
    assert peer.pending_outgoing == {}
    assert peer.receive(b'{"jsonrpc":"2.0","id":1,"result":{}}') == StrayResponse(1)


def test_forget_of_an_unknown_id_is_harmless() -> None:
    peer = JsonRpcPeer()
    peer.request("a")
    peer.forget(42)
    peer.forget("nope")
    assert peer.pending_outgoing == {1: "a"}


def test_ids_are_not_reused_after_an_answer() -> None:
    peer = JsonRpcPeer()
    peer.request("a")
    peer.receive(b'{"jsonrpc":"2.0","id":1,"result":1}')
    assert peer.request("b")[0] == 2


def test_directions_are_tracked_separately() -> None:
    peer = JsonRpcPeer()
    our_id, _ = peer.request("session/prompt")
    # The agent uses the same id number for its own request.
    assert peer.receive(line({"jsonrpc": "2.0", "id": our_id, "method": "session/request_permission"})) == Request(
        1, "session/request_permission", None
    )
    assert peer.pending_outgoing == {1: "session/prompt"}
    assert peer.open_incoming == {1: "session/request_permission"}
    # Answering the agent's request does not touch ours...
    peer.respond(1, {"outcome": {"outcome": "selected", "optionId": "reject"}})
    assert peer.pending_outgoing == {1: "session/prompt"}
    assert peer.open_incoming == {}
    # ...and a response with id 1 still answers ours.
    assert peer.receive(b'{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}') == Response(
        1, "session/prompt", result={"stopReason": "end_turn"}
    )


def test_agent_response_with_id_zero_answers_nothing_of_ours() -> None:
    # Our ids start at 1, so an id 0 response can only be stray.
    peer = JsonRpcPeer()
    peer.request("x")
    assert peer.receive(b'{"jsonrpc":"2.0","id":0,"result":null}') == StrayResponse(0)


def test_respond_to_an_unknown_agent_request_is_harmless() -> None:
    peer = JsonRpcPeer()
    peer.receive(b'{"jsonrpc":"2.0","id":"a","method":"m"}')
    assert peer.respond("b", None) == b'{"jsonrpc":"2.0","id":"b","result":null}\n'
    assert peer.open_incoming == {"a": "m"}


def test_unknown_fields_are_tolerated() -> None:
    peer = JsonRpcPeer()
    peer.request("x")
    assert peer.receive(b'{"jsonrpc":"2.0","id":1,"result":2,"_meta":{"a":1},"extra":[]}') == Response(1, "x", result=2)
    assert peer.receive(b'{"jsonrpc":"2.0","method":"n","params":{},"_meta":{}}') == RpcNotification("n", {})


def test_answer_to_a_request_id_with_a_lone_surrogate_can_be_encoded() -> None:
    peer = JsonRpcPeer()
    got = peer.receive(b'{"jsonrpc":"2.0","id":"\\ud800","method":"_vendor/x"}')
    assert got == Request("\ud800", "_vendor/x", None)
    out = peer.respond_error("\ud800", METHOD_NOT_FOUND, "method not found")
    assert out.endswith(b"\n")
    assert out.count(b"\n") == 1
    assert json.loads(out)["id"] == "\ud800"


_ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=30,
)


@given(_ANY_JSON, st.sampled_from(["", " ", "\t", "\r", " \r "]), st.sampled_from(["", " ", "\r", "\t "]))
def test_the_fast_parse_agrees_with_json_loads(value: Any, before: str, after: str) -> None:
    raw = (before + json.dumps(value) + after).encode()
    assert _loads(raw) == json.loads(raw)


@given(st.binary(max_size=40))
def test_the_fast_parse_refuses_what_json_loads_refuses(raw: bytes) -> None:
    try:
        expected = json.loads(raw.decode("utf-8"))
    except ValueError:
        with pytest.raises(ValueError):
            _loads(raw)
    else:
        assert _loads(raw) == expected


def test_a_byte_order_mark_is_tolerated_as_json_loads_does() -> None:
    raw = b'\xef\xbb\xbf{"jsonrpc":"2.0","method":"m"}'
    assert _loads(raw) == json.loads(raw) == {"jsonrpc": "2.0", "method": "m"}
