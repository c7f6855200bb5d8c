"""An ACP agent whose text cannot be encoded as it stands (stdlib only).

It answers ``initialize`` (agentInfo name with a lone surrogate) and ``session/new`` (the session
id given by ``--session-id``, by default one ending in a lone surrogate), and answers each prompt
with one agent_message_chunk ``half an emoji: \\ud83d`` (valid JSON, e.g. a model cut off in the
middle of a surrogate pair), then ``end_turn``. The lone surrogates travel as JSON escapes,
exactly as a real runtime would write them.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

LONE = "\\ud83d"  # the JSON escape of a lone high surrogate, written as is


def send(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def answer(msg_id: Any, result: str) -> None:
    send(f'{{"jsonrpc":"2.0","id":{json.dumps(msg_id)},"result":{result}}}')


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--session-id", default=None, help="session id (default: 'sess-' and a lone surrogate)")
    args = parser.parse_args()
    session_id = json.dumps(args.session_id) if args.session_id is not None else f'"sess-{LONE}"'
    for line in sys.stdin:
        msg = json.loads(line)
        method, msg_id = msg.get("method"), msg.get("id")
        if method == "initialize":
            answer(
                msg_id,
                f'{{"protocolVersion":1,"agentCapabilities":{{}},"agentInfo":{{"name":"half {LONE}","version":"1"}}}}',
            )
        elif method == "session/new":
            answer(msg_id, f'{{"sessionId":{session_id}}}')
        elif method == "session/prompt":
            send(
                '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
                + session_id
                + ',"update":{"sessionUpdate":"agent_message_chunk","messageId":"m1",'
                + f'"content":{{"type":"text","text":"half an emoji: {LONE}"}}}}}}}}'
            )
            answer(msg_id, '{"stopReason":"end_turn"}')
        elif msg_id is not None:
            send(f'{{"jsonrpc":"2.0","id":{json.dumps(msg_id)},"error":{{"code":-32601,"message":"not found"}}}}')


if __name__ == "__main__":
    main()
