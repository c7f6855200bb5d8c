"""An ACP agent that attacks its client (stdlib only): it floods, stops reading, nests deeply.

It answers ``initialize`` and ``session/new`` (session ``sess-h``) like any agent; what it does
with a prompt is chosen by the first word of the prompt text:

- ``flood``: reply chunks (``1``) as fast as it can write them, forever.
- ``flood-then-end N``: N reply chunks, then it answers ``end_turn``.
- ``permissions``: stop reading stdin and send permission requests (each with a refusing
  option) as fast as it can, forever.
- ``deep-update N``: one ``session/update`` nested N levels deep, then ``end_turn``.
- ``deep-answer N``: answer the prompt with a result nested N levels deep, then idle.
- ``garbled-answer``: answer the prompt with a line naming its id that is not JSON, then idle.
- ``malformed N``: N lines that are not JSON, then ``end_turn``.

With ``--deep-initialize`` its answer to ``initialize`` nests 500 levels deep.
A ``session/cancel`` is ignored (the client's bounds must end the turn on their own).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

OUT = sys.stdout.buffer


def send(message: dict[str, Any]) -> None:
    OUT.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
    OUT.flush()


def chunk(text: str) -> bytes:
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    message = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "sess-h", "update": update}}
    return json.dumps(message).encode() + b"\n"


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def prompt(request_id: Any, text: str) -> None:
    words = text.split()
    what, arg = words[0], int(words[1]) if len(words) > 1 else 0
    if what == "flood":
        line = chunk("1") * 64
        while True:
            OUT.write(line)
    elif what == "flood-then-end":
        line = chunk("1")
        for _ in range(arg):
            OUT.write(line)
    elif what == "permissions":
        options = [{"optionId": "no", "kind": "reject_once", "name": "No"}]
        n = 0
        while True:
            n += 1
            params = {"sessionId": "sess-h", "toolCall": {"toolCallId": f"t{n}"}, "options": options}
            send({"id": f"perm-{n}", "method": "session/request_permission", "params": params})
    elif what == "deep-update":
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x"}, "d": nested(arg)}
        send({"method": "session/update", "params": {"sessionId": "sess-h", "update": update}})
    elif what == "deep-answer":
        send({"id": request_id, "result": {"stopReason": "end_turn", "d": nested(arg)}})
        return  # that was the answer, if anyone can read it
    elif what == "garbled-answer":
        OUT.write(b'{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn"' % json.dumps(request_id).encode())
        OUT.write(b"\n")
        OUT.flush()
        return  # that was the answer, if anyone can read it
    elif what == "malformed":
        for i in range(arg):
            OUT.write(b"not json %d\n" % i)
    OUT.flush()
    send({"id": request_id, "result": {"stopReason": "end_turn"}})


def main() -> None:
    for raw in sys.stdin.buffer:
        message = json.loads(raw)
        method, request_id = message.get("method"), message.get("id")
        if method == "initialize":
            info = {"name": "hostile", "version": "1"}
            result = {"protocolVersion": 1, "agentCapabilities": {}, "agentInfo": info}
            if "--deep-initialize" in sys.argv:
                result["d"] = nested(500)
            send({"id": request_id, "result": result})
        elif method == "session/new":
            send({"id": request_id, "result": {"sessionId": "sess-h"}})
        elif method == "session/prompt":
            prompt(request_id, message["params"]["prompt"][0]["text"])
        elif request_id is not None and method is not None:
            send({"id": request_id, "error": {"code": -32601, "message": "method not found"}})


if __name__ == "__main__":
    try:
        main()
    except (BrokenPipeError, KeyboardInterrupt):
        os._exit(0)
