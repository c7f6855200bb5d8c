"""An ACP agent that asks the client for things only a person could give (stdlib only).

Each prompt's words choose what it asks during the turn, in order:
``noreject`` (a permission request offering only allowing options), ``reject`` (one offering a
refusing option), ``elicit`` (``elicitation/create``), ``fs`` (``fs/read_text_file``),
``terminal`` (``terminal/create``). ``late`` makes it answer the prompt first and ask for a
permission with no refusing option 0.3 s later, between turns. Every message it receives is
appended to the file named by ``--record``. A ``session/cancel`` makes it answer the prompt in
flight with ``cancelled``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

ALLOW_ONLY = [
    {"optionId": "yes", "kind": "allow_once", "name": "Yes"},
    {"optionId": "always", "kind": "allow_always", "name": "Always"},
]
WITH_REJECT = [*ALLOW_ONLY, {"optionId": "no", "kind": "reject_once", "name": "No"}]
REQUESTS: dict[str, tuple[str, dict[str, Any]]] = {
    "noreject": ("session/request_permission", {"toolCall": {"toolCallId": "t1"}, "options": ALLOW_ONLY}),
    "reject": ("session/request_permission", {"toolCall": {"toolCallId": "t2"}, "options": WITH_REJECT}),
    "elicit": ("elicitation/create", {"message": "What is your name?", "mode": "form", "requestedSchema": {}}),
    "fs": ("fs/read_text_file", {"path": "/etc/hostname"}),
    "terminal": ("terminal/create", {"command": "ls", "args": []}),
}


class Agent:
    def __init__(self, record: str | None) -> None:
        self.record = open(record, "a") if record else None
        self.next_id = 0
        self.cancelled = False

    def send(self, message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        sys.stdout.flush()

    def receive(self) -> dict[str, Any] | None:
        line = sys.stdin.readline()
        if not line:
            return None
        message: dict[str, Any] = json.loads(line)
        if self.record:
            self.record.write(line)
            self.record.flush()
        if message.get("method") == "session/cancel":
            self.cancelled = True
        return message

    def ask(self, session_id: str, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        request_id = self.next_id
        self.next_id += 1
        self.send({"id": request_id, "method": method, "params": {"sessionId": session_id, **params}})
        while (message := self.receive()) is not None:
            if message.get("id") == request_id and "method" not in message:
                return message
        return None

    def serve(self) -> None:
        while (message := self.receive()) is not None:
            method, request_id = message.get("method"), message.get("id")
            if method == "initialize":
                self.send({"id": request_id, "result": {"protocolVersion": 1, "agentInfo": {"name": "asking"}}})
            elif method == "session/new":
                self.send({"id": request_id, "result": {"sessionId": "ask-1"}})
            elif method == "session/prompt":
                self.turn(request_id, message["params"])

    def turn(self, request_id: Any, params: dict[str, Any]) -> None:
        words = " ".join(b.get("text", "") for b in params.get("prompt", [])).split()
        session_id = params["sessionId"]
        self.cancelled = False
        for word in words:
            if word in REQUESTS and not self.cancelled:
                self.ask(session_id, *REQUESTS[word])
        # Wait briefly for a cancel the client may send after its answers.
        deadline = time.monotonic() + 0.3
        while (
            not self.cancelled
            and "late" not in words
            and time.monotonic() < deadline
            and any(w in ("noreject", "elicit") for w in words)
        ):
            if self.receive() is None:
                return
        self.send({"id": request_id, "result": {"stopReason": "cancelled" if self.cancelled else "end_turn"}})
        if "late" in words:
            time.sleep(0.3)
            self.ask(session_id, *REQUESTS["noreject"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--record")
    Agent(parser.parse_args().record).serve()


if __name__ == "__main__":
    main()
