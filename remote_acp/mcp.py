"""Tool servers (MCP) delivered to a local agent: the model, the operator's file, the wire shapes.

Theory of operation. At session start, on a launch whose rules allow tool servers (a local
one: :mod:`remote_acp.session.remote_rules`), :func:`plan_delivery` reads the operator's
``mcp_config`` file (:func:`load_mcp_config`) and merges it with the servers the caller supplies
(:func:`merge_servers`), before anything is launched: a file that cannot be read or parsed, or
that reuses a reserved name, fails the start there. A remote launch reads nothing and delivers
nothing. Once ``initialize`` has answered, :meth:`Delivery.render` picks what the agent can take
(HTTP and SSE servers only when its ``mcpCapabilities`` says so) and renders the ACP wire shapes
sent in ``session/new``, ``session/load`` and ``session/resume``.

The values of ``env`` and ``headers`` are credentials. They appear in no ``repr``, no error
message and no log line written here, and :attr:`Delivery.secrets` hands them to the session,
which masks them in everything it lets out (:mod:`remote_acp.masking`). They reach the agent
only inside the JSON-RPC request on its stdin, never on a command line.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from .errors import Cause, ErrorKind, RemoteAcpError
from .local_files import NotRegularFileError, TooLargeError, read_small_file
from .logs import get_logger

if TYPE_CHECKING:
    from logging import Logger, LoggerAdapter

    from .protocol.wire import InitializeResult
    from .session.remote_rules import LaunchRules

__all__ = [
    "Delivery",
    "McpServer",
    "Rendered",
    "load_mcp_config",
    "merge_servers",
    "parse_mcp_config",
    "plan_delivery",
    "render_server",
]

log = get_logger("remote_acp.mcp")

Transport = Literal["stdio", "http", "sse"]
MAX_CONFIG_BYTES: Final = 4 * 1024 * 1024
"""A tool-server file is a few hundred bytes; a larger one is not what the operator meant."""
_PREFIX: Final = "parse MCP config: "
WITHHELD_WARNING: Final = (
    "configured tool servers were not delivered: the agent does not advertise {} tool-server support"
)
_LABEL: Final = {"http": "HTTP", "sse": "SSE"}


@dataclass(frozen=True, slots=True)
class McpServer:
    """One tool server. ``stdio``: ``command`` with ``args`` and ``env``; ``http``/``sse``: ``url``
    with ``headers``. ``env`` and ``headers`` hold secrets: never logged, never on a command line
    (and left out of ``repr``, so a logged options object does not carry them)."""

    name: str
    transport: Transport = "stdio"
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    @property
    def secrets(self) -> tuple[str, ...]:
        """The values of ``env`` and ``headers``."""
        return tuple(value for _, value in (*self.env, *self.headers))


def _fail(message: str) -> RemoteAcpError:
    # A broken file fails the same way on every attempt: retrying cannot help.
    return RemoteAcpError(ErrorKind.RESPONSE_ERROR, _PREFIX + message, cause=Cause.CONFIG_INVALID)


# -- the operator's file ------------------------------------------------------------------------


def load_mcp_config(path: str | os.PathLike[str]) -> tuple[McpServer, ...]:
    """The enabled servers of an ``{"mcpServers": {...}}`` file, in the file's order.

    :raises RemoteAcpError: ``response_error`` "parse MCP config: ..." when the file cannot be
        read, is not a regular file, is not JSON, or does not have the shape (the message names
        the server and key, never a value).
    """
    shown = os.fspath(path)
    try:
        data = read_small_file(path, MAX_CONFIG_BYTES)
    except NotRegularFileError:
        raise _fail(f"{shown} is not a regular file") from None
    except TooLargeError:
        raise _fail(f"{shown} is larger than {MAX_CONFIG_BYTES} bytes") from None
    except OSError as exc:
        raise _fail(f"cannot read {shown}: {exc.strerror or type(exc).__name__}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise _fail(f"{shown} is not UTF-8 text") from None
    return parse_mcp_config(text, source=shown)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def parse_mcp_config(text: str, *, source: str = "the MCP config") -> tuple[McpServer, ...]:
    """:func:`load_mcp_config` on text already read (``source`` names it in messages)."""
    try:
        document = json.loads(text, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as exc:
        # json would keep the last of two equal keys; a server silently lost is worse than an error.
        raise _fail(f"{source}: the key {exc.key!r} appears twice in one object") from None
    except (ValueError, RecursionError) as exc:
        # JSONDecodeError's own message names the expected token and the position, never the text.
        where = f" (line {exc.lineno} column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise _fail(f"{source} is not valid JSON{where}") from None
    if not isinstance(document, dict):
        raise _fail(f"{source}: the top level is not an object")
    servers = document.get("mcpServers")
    if not isinstance(servers, dict):
        raise _fail(f"{source}: no mcpServers object")
    parsed = (_server(name, entry, source) for name, entry in servers.items())
    return tuple(server for server in parsed if server is not None)


def _server(name: str, entry: Any, source: str) -> McpServer | None:
    where = f"{source}: server {name!r}"
    if not name:
        raise _fail(f"{source}: a server has an empty name")
    if not isinstance(entry, dict):
        raise _fail(f"{where} is not an object")
    enabled = entry.get("enabled", True)
    if not isinstance(enabled, bool):
        raise _fail(f"{where}: enabled is not a boolean")
    if not enabled:
        log.debug("tool server disabled in the MCP config", extra={"mcp_server": name})
        return None
    kind = entry.get("type", "stdio")
    if kind == "stdio":
        command = entry.get("command")
        if not isinstance(command, str) or not command:
            raise _fail(f"{where}: command is missing or not a non-empty string")
        args = entry.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise _fail(f"{where}: args is not a list of strings")
        return McpServer(name, "stdio", command=command, args=tuple(args), env=_pairs(entry, "env", where))
    if kind in ("http", "sse"):
        url = entry.get("url")
        if not isinstance(url, str) or not url:
            raise _fail(f"{where}: url is missing or not a non-empty string")
        return McpServer(name, kind, url=url, headers=_pairs(entry, "headers", where))
    raise _fail(f"{where}: type is not one of stdio, http, sse")


def _pairs(entry: dict[str, Any], key: str, where: str) -> tuple[tuple[str, str], ...]:
    """``env`` or ``headers`` as (name, value) pairs; a bad value is named by its key only."""
    mapping = entry.get(key, {})
    if not isinstance(mapping, dict):
        raise _fail(f"{where}: {key} is not an object")
    for name, value in mapping.items():
        if not isinstance(value, str):
            raise _fail(f"{where}: {key} {name!r} is not a string")
    return tuple(mapping.items())


def merge_servers(from_file: tuple[McpServer, ...], supplied: tuple[McpServer, ...]) -> tuple[McpServer, ...]:
    """The caller's servers, then the file's. The caller's names are reserved.

    :raises RemoteAcpError: ``response_error`` when a file server takes a reserved name, two
        supplied servers share a name, or a supplied server lacks its command or url.
    """
    reserved: set[str] = set()
    for server in supplied:
        if not isinstance(server, McpServer):
            raise _fail(f"a supplied tool server is a {type(server).__name__}, not an McpServer")
        if server.name in reserved:
            raise _fail(f"two supplied tool servers are named {server.name!r}")
        if not server.name or (server.command if server.transport == "stdio" else server.url) is None:
            what = "command" if server.transport == "stdio" else "url"
            raise _fail(f"the supplied tool server {server.name!r} has no name or no {what}")
        reserved.add(server.name)
    for server in from_file:
        if server.name in reserved:
            raise _fail(f"server name {server.name!r} is reserved by a tool server the caller supplies")
    return (*supplied, *from_file)


# -- the wire ---------------------------------------------------------------------------------


def _named(pairs: tuple[tuple[str, str], ...]) -> list[dict[str, str]]:
    return [{"name": name, "value": value} for name, value in sorted(pairs)]


def render_server(server: McpServer) -> dict[str, Any]:
    """The ACP wire shape of one server; ``env`` and ``headers`` sorted by name.

    stdio ``{name, command, args, env: [{name, value}]}``; http and sse
    ``{type, name, url, headers: [{name, value}]}``.
    """
    if server.transport == "stdio":
        return {"name": server.name, "command": server.command, "args": list(server.args), "env": _named(server.env)}
    return {"type": server.transport, "name": server.name, "url": server.url, "headers": _named(server.headers)}


@dataclass(frozen=True, slots=True)
class Delivery:
    """The tool servers a session may deliver, chosen before launch; nothing for a remote
    launch or a credential check."""

    servers: tuple[McpServer, ...] = ()

    @property
    def secrets(self) -> tuple[str, ...]:
        """Every ``env`` and ``headers`` value, for the session to mask."""
        return tuple(value for server in self.servers for value in server.secrets)

    def render(self, init: InitializeResult, logger: Logger | LoggerAdapter[Logger] = log) -> Rendered:
        """The ``mcpServers`` list for what the agent advertises: HTTP servers only with
        ``mcpCapabilities.http`` true, SSE servers only with ``sse`` true. Each transport
        withheld is logged once at warning (the servers' names, never a URL or header) and
        named in :attr:`Rendered.withheld`, for the capability record."""
        servers: list[dict[str, Any]] = []
        withheld: dict[str, list[str]] = {}
        for server in self.servers:
            if server.transport != "stdio" and not init.mcp_transport(server.transport):
                withheld.setdefault(server.transport, []).append(server.name)
                continue
            servers.append(render_server(server))
        reasons = []
        for transport, names in withheld.items():
            reason = WITHHELD_WARNING.format(_LABEL[transport])
            logger.warning(reason, extra={"mcp_servers": ",".join(names), "count": len(names)})
            reasons.append(reason)
        if servers:
            delivered = ",".join(s["name"] for s in servers)
            logger.debug("delivering tool servers", extra={"mcp_servers": delivered, "count": len(servers)})
        return Rendered(servers, tuple(reasons))


@dataclass(frozen=True, slots=True)
class Rendered:
    """What :meth:`Delivery.render` chose: the wire list, and why anything was withheld."""

    servers: list[dict[str, Any]]
    """The ``mcpServers`` value (``[]`` when there is nothing to deliver)."""
    withheld: tuple[str, ...] = ()
    """One reason per transport the agent cannot take (the tool-servers capability lowers)."""


class WantedServers(Protocol):
    """What a session asks to deliver (:class:`~remote_acp.options.SessionOptions` is one): the
    operator's file and the caller's own servers."""

    @property
    def mcp_config(self) -> str | None: ...
    @property
    def mcp_servers(self) -> tuple[McpServer, ...]: ...


def plan_delivery(options: WantedServers, rules: LaunchRules, *, verification: bool = False) -> Delivery:
    """What a session delivers: nothing when ``rules`` forbid tool servers (a remote launch: the
    file is not even read), else the caller's servers and the file's, merged. A credential
    check reads and checks the file too (a broken one fails the check, not the later run) but
    delivers nothing.

    :raises RemoteAcpError: ``response_error`` "parse MCP config: ..." (see :func:`load_mcp_config`
        and :func:`merge_servers`).
    """
    if not rules.tool_servers:
        return Delivery()
    from_file = load_mcp_config(options.mcp_config) if options.mcp_config else ()
    servers = merge_servers(from_file, options.mcp_servers)
    return Delivery() if verification else Delivery(servers)
