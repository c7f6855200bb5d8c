"""The floor of an ACP handshake over OpenSSH: on every host at once, log in with ``ssh``, start the
agent, ``initialize``, ``session/new``, close its stdin, wait for the login to end.

    python -m benchmarks._acp_fanout --config SSH_CONFIG --user USER --agent PATH --workspace DIR ALIAS...

Run as a process of its own by ``fleet.py``. Nothing else a session does: no probe, no supervisor,
no ready marker or login-proof script, no masking, no bounds beyond one overall timeout; the
remote command goes through the login shell as written. Prints one JSON object (``ok``,
``failed``) and exits 1 when any host failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys

INITIALIZE = {"protocolVersion": 1, "clientCapabilities": {}}


async def _answer(out: asyncio.StreamReader, request_id: int) -> dict[str, object]:
    """The response to ``request_id``, skipping notifications and anything else."""
    while True:
        line = await out.readline()
        if not line:
            raise EOFError(f"the agent ended before answering request {request_id}")
        message = json.loads(line)
        if message.get("id") == request_id and "method" not in message:
            if "error" in message:
                raise RuntimeError(f"request {request_id}: {message['error']}")
            return dict(message["result"])


async def one(alias: str, args: argparse.Namespace) -> str | None:
    remote = f"cd {shlex.quote(args.workspace)} && exec {shlex.quote(args.agent)}"
    process = await asyncio.create_subprocess_exec(
        "ssh",
        "-F",
        args.config,
        "-l",
        args.user,
        "-T",
        "-o",
        "BatchMode=yes",
        alias,
        remote,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        calls = (("initialize", INITIALIZE), ("session/new", {"cwd": args.workspace, "mcpServers": []}))
        for request_id, (method, params) in enumerate(calls, 1):
            line = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            process.stdin.write(json.dumps(line).encode() + b"\n")
            await _answer(process.stdout, request_id)
        process.stdin.close()
        status = await process.wait()
        return None if status == 0 else f"{alias}: ssh exited {status}"
    except (OSError, EOFError, RuntimeError, ValueError) as exc:
        return f"{alias}: {type(exc).__name__}: {exc}"
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def fan_out(args: argparse.Namespace) -> dict[str, object]:
    results = await asyncio.wait_for(asyncio.gather(*(one(alias, args) for alias in args.aliases)), args.timeout)
    failed = [r for r in results if r is not None]
    return {"ok": len(results) - len(failed), "failed": failed}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="the ssh_config every login reads")
    parser.add_argument("--user", required=True)
    parser.add_argument("--agent", required=True, help="the agent's path on the hosts")
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--timeout", type=float, default=300.0, help="the whole run's bound, seconds")
    parser.add_argument("aliases", nargs="+", metavar="ALIAS")
    args = parser.parse_args()
    result = asyncio.run(fan_out(args))
    print(json.dumps(result))
    return 1 if result["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
