"""A tiny stdio MCP server (stdlib only) for delivery tests: one tool, ``probe_echo``, whose
result carries ``$PROBE_MARKER``, so a test sees that the server ran with the env it was given.

Usage: ``python mcp_probe_server.py RECORD``; a first line with ``$PROBE_MARKER``, then every
message received, is appended to RECORD.
"""

from __future__ import annotations

import json
import os
import sys

TOOL = {
    "name": "probe_echo",
    "description": "Echo the given text with the probe marker.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}


EMPTY_LISTS = {
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
}


def answer(message: dict[str, object]) -> object:
    method = message.get("method")
    params = message.get("params") if isinstance(message.get("params"), dict) else {}
    assert isinstance(params, dict)
    if method == "initialize":
        version = params.get("protocolVersion", "2024-11-05")
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "probe", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": [TOOL]}
    if method in EMPTY_LISTS:
        return {EMPTY_LISTS[method]: []}
    if method == "tools/call":
        arguments = params.get("arguments") if isinstance(params.get("arguments"), dict) else {}
        assert isinstance(arguments, dict)
        text = f"probe says {arguments.get('text')} marker={os.environ.get('PROBE_MARKER', '')}"
        return {"content": [{"type": "text", "text": text}], "isError": False}
    return {}  # ping and anything else: an empty result


def main() -> None:
    record = sys.argv[1]
    with open(record, "a") as f:  # what it was started with: the env a client rendered reaches it
        f.write(json.dumps({"method": None, "marker": os.environ.get("PROBE_MARKER")}) + "\n")
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        with open(record, "a") as f:
            f.write(json.dumps({"method": message.get("method"), "params": message.get("params")}) + "\n")
        if "id" not in message or "method" not in message:
            continue  # a notification (or an answer to a request we never make)
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": answer(message)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
