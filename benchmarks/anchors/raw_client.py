"""Anchor: the smallest useful ACP client, stdlib only (subprocess + json), no error handling.

    python raw_client.py run|stats PROMPT AGENT_ARGV...

``run`` prints the reply text, like ``remote-acp run``. ``stats`` prints one JSON object:
``start_s`` (spawn, initialize, session/new), ``turn_s`` (prompt sent to its answer),
``teardown_s`` (close stdin, wait for the exit), ``chunks``, and ``rss_kib``/``hwm_kib`` of this
process read while it holds the session after the turn.

The turn loop is the "raw stdlib loop" of DESIGN section 5: read a line, ``json.loads``, a few
dict lookups. Exit status 0 when the turn ended with ``end_turn``.

Behind a supervised ssh (remote-acp's ssh target), ``RAW_PREFIX_FILE``, ``RAW_READY_MARKER`` and
``RAW_READY_REPLY`` make it speak that start first: the script, then the go-ahead once the
remote side printed its ready marker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import IO, Any


def rss() -> dict[str, int]:
    out: dict[str, int] = {}
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line[2:5].lower() + "_kib"] = int(line.split()[1])
    return out


def send(stdin: IO[bytes], message: dict[str, Any]) -> None:
    stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
    stdin.flush()


def answer(stdout: IO[bytes], request_id: int) -> dict[str, Any]:
    for line in stdout:
        message = json.loads(line)
        if message.get("id") == request_id and "method" not in message:
            result: dict[str, Any] = message["result"]
            return result
    raise SystemExit("agent closed stdout")


def main(argv: list[str]) -> int:
    mode, prompt, agent = argv[0], argv[1], argv[2:]
    t0 = time.perf_counter()
    proc = subprocess.Popen(agent, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    stdin, stdout = proc.stdin, proc.stdout
    assert stdin is not None and stdout is not None
    if "RAW_PREFIX_FILE" in os.environ:
        with open(os.environ["RAW_PREFIX_FILE"], "rb") as fh:
            stdin.write(fh.read())
        stdin.flush()
        marker = os.environ["RAW_READY_MARKER"].encode()
        while (line := stdout.readline()) and line.rstrip(b"\n") != marker:
            pass
        stdin.write(os.environ["RAW_READY_REPLY"].encode())
        stdin.flush()
    send(stdin, {"id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}})
    answer(stdout, 1)
    send(stdin, {"id": 2, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}})
    session_id = answer(stdout, 2)["sessionId"]
    t1 = time.perf_counter()
    prompt_params = {"sessionId": session_id, "prompt": [{"type": "text", "text": prompt}]}
    send(stdin, {"id": 3, "method": "session/prompt", "params": prompt_params})
    chunks = 0
    parts: list[str] = []
    stop = None
    for line in stdout:
        message = json.loads(line)
        if message.get("method") == "session/update":
            update = message["params"]["update"]
            if update["sessionUpdate"] == "agent_message_chunk":
                chunks += 1
                if mode == "run":
                    parts.append(update["content"]["text"])
        elif message.get("id") == 3:
            stop = message["result"]["stopReason"]
            break
    t2 = time.perf_counter()
    memory = rss()
    if mode == "run":
        sys.stdout.write("".join(parts) + "\n")
    stdin.close()
    proc.wait()
    stdout.close()
    t3 = time.perf_counter()
    if mode == "stats":
        stats = {"start_s": t1 - t0, "turn_s": t2 - t1, "teardown_s": t3 - t2, "chunks": chunks, **memory}
        print(json.dumps(stats))
    return 0 if stop == "end_turn" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
