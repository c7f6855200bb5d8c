"""Tool servers as data: the operator's file parsed, merged with the caller's, rendered into the
ACP wire shapes (checked against the official SDK's schema models), withheld by transport."""

from __future__ import annotations

import json
import logging
import os
from typing import TYPE_CHECKING, Any

import pytest
from acp.schema import (
    HttpMcpServer,
    LoadSessionRequest,
    McpServerStdio,
    NewSessionRequest,
    ResumeSessionRequest,
    SseMcpServer,
)

from remote_acp import ErrorKind, RemoteAcpError, SessionOptions
from remote_acp.mcp import (
    WITHHELD_WARNING,
    Delivery,
    McpServer,
    load_mcp_config,
    merge_servers,
    parse_mcp_config,
    plan_delivery,
    render_server,
)
from remote_acp.protocol.wire import load_params, new_session_params, parse_initialize, resume_params
from remote_acp.session.remote_rules import rules_for

if TYPE_CHECKING:
    from pathlib import Path

TOKEN = "ghp_file-token-0123456789"
HEADER = "Bearer header-secret-abcdef"

CONFIG: dict[str, Any] = {
    "mcpServers": {
        "files": {"command": "/usr/bin/mcp-files", "args": ["--root", "/srv"], "env": {"Z_LAST": "z", "TOKEN": TOKEN}},
        "search": {
            "type": "http",
            "url": "https://mcp.example/search",
            "headers": {"X-B": "b", "Authorization": HEADER},
        },
        "events": {"type": "sse", "url": "https://mcp.example/events"},
        "off": {"command": "/usr/bin/never", "enabled": False},
        "off-broken": {"enabled": False, "type": "carrier-pigeon"},
    }
}


def write(tmp_path: Path, document: Any, name: str = "mcp.json") -> Path:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def init_with(**mcp: bool) -> Any:
    return parse_initialize({"protocolVersion": 1, "agentCapabilities": {"mcpCapabilities": mcp}})


# -- parsing ----------------------------------------------------------------------------------


def test_the_file_is_parsed_in_order_and_disabled_servers_are_dropped(tmp_path: Path) -> None:
    servers = load_mcp_config(write(tmp_path, CONFIG))
    assert [s.name for s in servers] == ["files", "search", "events"]
    files, search, events = servers
    assert files == McpServer(
        "files", "stdio", command="/usr/bin/mcp-files", args=("--root", "/srv"), env=(("Z_LAST", "z"), ("TOKEN", TOKEN))
    )
    assert (search.transport, search.url, search.headers) == (
        "http",
        "https://mcp.example/search",
        (("X-B", "b"), ("Authorization", HEADER)),
    )
    assert (events.transport, events.headers) == ("sse", ())


def test_an_explicit_stdio_type_and_enabled_true_are_accepted() -> None:
    text = json.dumps({"mcpServers": {"a": {"type": "stdio", "command": "x", "enabled": True}}})
    assert parse_mcp_config(text) == (McpServer("a", command="x"),)


def test_no_servers_is_not_an_error() -> None:
    assert parse_mcp_config('{"mcpServers": {}}') == ()


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ("{not json", "is not valid JSON (line 1 column 2)"),
        ("[]", "the top level is not an object"),
        ('{"servers": {}}', "no mcpServers object"),
        ('{"mcpServers": []}', "no mcpServers object"),
        ('{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}', "the key 'a' appears twice"),
        ('{"mcpServers": {"a": 1}}', "server 'a' is not an object"),
        ('{"mcpServers": {"": {"command": "x"}}}', "a server has an empty name"),
        ('{"mcpServers": {"a": {"args": []}}}', "server 'a': command is missing"),
        ('{"mcpServers": {"a": {"command": "x", "args": "-v"}}}', "server 'a': args is not a list of strings"),
        ('{"mcpServers": {"a": {"command": "x", "env": ["K=V"]}}}', "server 'a': env is not an object"),
        ('{"mcpServers": {"a": {"command": "x", "env": {"K": 1}}}}', "server 'a': env 'K' is not a string"),
        ('{"mcpServers": {"a": {"type": "http"}}}', "server 'a': url is missing"),
        ('{"mcpServers": {"a": {"type": "http", "url": "u", "headers": {"H": null}}}}', "headers 'H' is not a string"),
        ('{"mcpServers": {"a": {"type": "websocket", "url": "u"}}}', "server 'a': type is not one of stdio, http, sse"),
        ('{"mcpServers": {"a": {"type": 7}}}', "server 'a': type is not one of stdio, http, sse"),
        ('{"mcpServers": {"a": {"command": "x", "enabled": "no"}}}', "server 'a': enabled is not a boolean"),
    ],
)
def test_a_malformed_file_fails_with_a_response_error(tmp_path: Path, document: str, expected: str) -> None:
    path = write(tmp_path, document)
    with pytest.raises(RemoteAcpError) as info:
        load_mcp_config(path)
    assert info.value.kind is ErrorKind.RESPONSE_ERROR
    assert info.value.message.startswith(f"parse MCP config: {path}")
    assert expected in info.value.message


def test_an_unreadable_file_names_the_path_and_the_reason(tmp_path: Path) -> None:
    missing = tmp_path / "absent.json"
    with pytest.raises(RemoteAcpError) as info:
        load_mcp_config(missing)
    assert info.value.message == f"parse MCP config: cannot read {missing}: No such file or directory"
    with pytest.raises(RemoteAcpError, match=f"parse MCP config: {tmp_path} is not a regular file"):
        load_mcp_config(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # with no writer: an open() that blocked would never return
    with pytest.raises(RemoteAcpError, match="is not a regular file"):
        load_mcp_config(fifo)


def test_not_utf8_and_oversized_files_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.json"
    bad.write_bytes(b'{"mcpServers": {"caf\xe9": {}}}')
    with pytest.raises(RemoteAcpError, match="is not UTF-8 text"):
        load_mcp_config(bad)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (4 * 1024 * 1024 + 1))
    with pytest.raises(RemoteAcpError, match="is larger than"):
        load_mcp_config(big)


def test_no_error_message_quotes_a_value(tmp_path: Path) -> None:
    """A broken entry next to secrets: the message names keys, never what they hold."""
    documents = [
        {"mcpServers": {"a": {"command": "x", "env": {"TOKEN": TOKEN, "N": 5}}}},
        {"mcpServers": {"a": {"type": "http", "url": HEADER, "headers": {"A": HEADER, "B": [TOKEN]}}}},
        {"mcpServers": {"a": {"type": TOKEN, "env": {"TOKEN": TOKEN}}}},
        '{"mcpServers": {"a": {"command": "x", "env": {"TOKEN": "' + TOKEN + '" "broken"}}}}',
    ]
    for document in documents:
        with pytest.raises(RemoteAcpError) as info:
            load_mcp_config(write(tmp_path, document))
        assert TOKEN not in str(info.value) and HEADER not in str(info.value)
        assert TOKEN[:8] not in str(info.value)


# -- merging ----------------------------------------------------------------------------------


def test_the_callers_servers_come_first_and_their_names_are_reserved() -> None:
    mine = McpServer("sortie-tools", command="/opt/tools")
    from_file = (McpServer("files", command="/usr/bin/mcp-files"),)
    assert merge_servers(from_file, (mine,)) == (mine, *from_file)
    with pytest.raises(RemoteAcpError) as info:
        merge_servers((McpServer("sortie-tools", command="/elsewhere", env=(("K", TOKEN),)),), (mine,))
    assert info.value.kind is ErrorKind.RESPONSE_ERROR
    assert info.value.message == (
        "parse MCP config: server name 'sortie-tools' is reserved by a tool server the caller supplies"
    )


def test_supplied_servers_are_checked() -> None:
    with pytest.raises(RemoteAcpError, match="two supplied tool servers are named 'a'"):
        merge_servers((), (McpServer("a", command="x"), McpServer("a", command="y")))
    with pytest.raises(RemoteAcpError, match="has no name or no command"):
        merge_servers((), (McpServer("a"),))
    with pytest.raises(RemoteAcpError, match="has no name or no url"):
        merge_servers((), (McpServer("h", "http"),))


def test_env_and_header_values_stay_out_of_repr() -> None:
    server = McpServer("a", command="x", env=(("TOKEN", TOKEN),), headers=(("A", HEADER),))
    options = SessionOptions(command="agent", mcp_servers=(server,))
    assert TOKEN not in repr(server) and HEADER not in repr(options)
    assert server.secrets == (TOKEN, HEADER)


# -- what a launch delivers ---------------------------------------------------------------------


def test_a_remote_launch_reads_nothing_and_delivers_nothing(tmp_path: Path) -> None:
    absent = str(tmp_path / "absent.json")  # reading it would fail: it is never opened
    options = SessionOptions(command="agent", mcp_config=absent, mcp_servers=(McpServer("a", command="x"),))
    assert plan_delivery(options, rules_for(True)) == Delivery()
    with pytest.raises(RemoteAcpError, match="cannot read"):
        plan_delivery(options, rules_for(False))


def test_a_local_launch_merges_and_a_credential_check_only_checks(tmp_path: Path) -> None:
    path = str(write(tmp_path, CONFIG))
    mine = McpServer("mine", command="/opt/mine", env=(("K", "mine-secret-value"),))
    options = SessionOptions(command="agent", mcp_config=path, mcp_servers=(mine,))
    delivery = plan_delivery(options, rules_for(False))
    assert [s.name for s in delivery.servers] == ["mine", "files", "search", "events"]
    assert set(delivery.secrets) == {"mine-secret-value", "z", TOKEN, "b", HEADER}
    assert plan_delivery(options, rules_for(False), verification=True) == Delivery()
    clash = SessionOptions(command="agent", mcp_config=path, mcp_servers=(McpServer("files", command="/x"),))
    with pytest.raises(RemoteAcpError, match="reserved"):
        plan_delivery(clash, rules_for(False), verification=True)


# -- rendering --------------------------------------------------------------------------------


def test_stdio_and_url_servers_render_in_the_acp_shapes_sorted_by_name(tmp_path: Path) -> None:
    files, search, events = load_mcp_config(write(tmp_path, CONFIG))
    assert render_server(files) == {
        "name": "files",
        "command": "/usr/bin/mcp-files",
        "args": ["--root", "/srv"],
        "env": [{"name": "TOKEN", "value": TOKEN}, {"name": "Z_LAST", "value": "z"}],
    }
    assert render_server(search) == {
        "type": "http",
        "name": "search",
        "url": "https://mcp.example/search",
        "headers": [{"name": "Authorization", "value": HEADER}, {"name": "X-B", "value": "b"}],
    }
    assert render_server(events) == {
        "type": "sse",
        "name": "events",
        "url": "https://mcp.example/events",
        "headers": [],
    }


def _conforms(rendered: dict[str, Any]) -> None:
    """Validated by the SDK's model of its transport and dumped back unchanged: no key missing,
    none added, none misspelled (the SDK's request models silently skip an invalid entry)."""
    model = {"http": HttpMcpServer, "sse": SseMcpServer}.get(rendered.get("type", ""), McpServerStdio)
    parsed = model.model_validate(rendered)
    assert parsed.model_dump(by_alias=True, exclude_none=True) == rendered


def test_rendered_shapes_conform_to_the_sdk_schema(tmp_path: Path) -> None:
    delivery = Delivery(load_mcp_config(write(tmp_path, CONFIG)))
    rendered = delivery.render(init_with(http=True, sse=True)).servers
    assert len(rendered) == 3
    for server in rendered:
        _conforms(server)
    new = NewSessionRequest.model_validate(new_session_params("/w", rendered))
    load = LoadSessionRequest.model_validate(load_params("s-1", "/w", rendered))
    resume = ResumeSessionRequest.model_validate(resume_params("s-1", "/w", rendered))
    for request in (new, load, resume):
        assert request.mcp_servers is not None and len(request.mcp_servers) == 3
        assert [type(s).__name__ for s in request.mcp_servers] == ["McpServerStdio", "HttpMcpServer", "SseMcpServer"]
    stdio = new.mcp_servers[0]
    assert isinstance(stdio, McpServerStdio) and stdio.env[0].value == TOKEN


def test_empty_lists_conform_and_resume_omits_them() -> None:
    assert new_session_params("/w", []) == {"cwd": "/w", "mcpServers": []}
    assert load_params("s", "/w", []) == {"sessionId": "s", "cwd": "/w", "mcpServers": []}
    assert resume_params("s", "/w", []) == {"sessionId": "s", "cwd": "/w"}
    NewSessionRequest.model_validate(new_session_params("/w", []))
    LoadSessionRequest.model_validate(load_params("s", "/w", []))
    assert ResumeSessionRequest.model_validate(resume_params("s", "/w", [])).mcp_servers is None


def test_a_modified_shape_fails_the_conformance_check() -> None:
    """The check above can fail: a misspelled or missing key is caught."""
    good = render_server(McpServer("a", command="x", env=(("K", "v"),)))
    with pytest.raises(AssertionError):
        _conforms({**good, "environment": good.pop("env")})
    with pytest.raises(ValueError):  # pydantic's ValidationError is a ValueError
        _conforms({"name": "a", "command": "x", "args": []})


@pytest.mark.parametrize(
    ("caps", "delivered", "withheld"),
    [
        ({}, ["files"], ["HTTP", "SSE"]),
        ({"http": True}, ["files", "search"], ["SSE"]),
        ({"sse": True}, ["files", "events"], ["HTTP"]),
        ({"http": True, "sse": True}, ["files", "search", "events"], []),
        ({"http": "yes", "sse": 1}, ["files"], ["HTTP", "SSE"]),  # only a real true counts
    ],
)
def test_url_servers_are_withheld_unless_advertised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, caps: dict[str, Any], delivered: list[str], withheld: list[str]
) -> None:
    delivery = Delivery(load_mcp_config(write(tmp_path, CONFIG)))
    with caplog.at_level(logging.DEBUG, logger="remote_acp"):
        rendered = delivery.render(init_with(**caps))
    assert [s["name"] for s in rendered.servers] == delivered
    assert rendered.withheld == tuple(WITHHELD_WARNING.format(label) for label in withheld)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == list(rendered.withheld)
    if withheld:
        assert warnings[0] == (
            f"configured tool servers were not delivered: the agent does not advertise {withheld[0]} "
            "tool-server support"
        )
    logged = caplog.text + "".join(str(r.__dict__) for r in caplog.records)
    assert TOKEN not in logged and HEADER not in logged and "mcp.example" not in logged


def test_no_mcp_capabilities_object_withholds_url_servers() -> None:
    delivery = Delivery((McpServer("h", "http", url="https://x"),))
    init = parse_initialize({"protocolVersion": 1, "agentCapabilities": {"mcpCapabilities": None}})
    assert delivery.render(init).servers == []
    assert delivery.render(parse_initialize({"protocolVersion": 1})).servers == []
