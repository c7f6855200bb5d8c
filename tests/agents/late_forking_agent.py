"""An ACP agent whose descendants try to outlive it (for the containment tests).

``--sigterm-setsid PATH``: on SIGTERM, fork a child that calls ``setsid`` and sleeps (its pid
in PATH), then exit 0: the child appears after teardown's first look at the tree.
``--scrubbed PATH``: while answering session/new, double-fork a grandchild that execs a sleeper
with an empty environment (its pid in PATH): no session mark, no parent, its own session.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from typing import Any

SLEEPER = "import time; time.sleep(600)"


def write_pid(path: str, pid: int) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(str(pid))
    os.rename(tmp, path)  # whole or absent: the test polls for it


def send(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def setsid_child_on_sigterm(path: str) -> None:
    def handler(signum: int, frame: object) -> None:
        pid = os.fork()
        if pid == 0:
            os.setsid()
            os.closerange(0, 3)  # holds none of the agent's pipes: only containment can find it
            os.execv(sys.executable, [sys.executable, "-c", SLEEPER])
        write_pid(path, pid)
        os._exit(0)

    signal.signal(signal.SIGTERM, handler)


def scrubbed_grandchild(path: str) -> None:
    if os.fork() == 0:
        os.setsid()
        pid = os.fork()
        if pid == 0:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            os.execve(sys.executable, [sys.executable, "-c", SLEEPER], {})
        write_pid(path, pid)
        os._exit(0)  # the intermediate: the grandchild loses its parent
    os.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sigterm-setsid", metavar="PATH")
    parser.add_argument("--scrubbed", metavar="PATH")
    args = parser.parse_args()
    if args.sigterm_setsid:
        setsid_child_on_sigterm(args.sigterm_setsid)
    for line in sys.stdin:
        msg = json.loads(line)
        method, mid = msg.get("method"), msg.get("id")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": 1}})
        elif method == "session/new":
            if args.scrubbed:
                scrubbed_grandchild(args.scrubbed)
            send({"jsonrpc": "2.0", "id": mid, "result": {"sessionId": "s"}})
        elif method == "session/prompt":
            send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn"}})
    # stdin closed: wait for the SIGTERM that teardown sends, as a slow agent would
    time.sleep(30)


if __name__ == "__main__":
    main()
