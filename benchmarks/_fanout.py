"""The floor of any probe: connect to every host at once with asyncssh, run ``true``, close.

    python -m benchmarks._fanout --user root --key KEY --known-hosts FILE ADDRESS:PORT...

Run as a process of its own by ``fleet.py``, so its figure includes what every probing command
pays: the interpreter's start and asyncssh's import. Nothing is resolved: the addresses, the key
and the known_hosts file are given, no ssh_config is read, no ``ssh -G`` is run. Prints one JSON
object (``ok``, ``failed``, ``connected_s``: from the first connect to the last close) and exits 1
when any host failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time


async def one(address: str, port: int, args: argparse.Namespace) -> str | None:
    import asyncssh

    try:
        async with asyncssh.connect(
            address,
            port=port,
            username=args.user,
            client_keys=[args.key],
            known_hosts=args.known_hosts,
            config=None,
            agent_path=None,
            connect_timeout=args.timeout,
        ) as conn:
            done = await conn.run("true", check=False, timeout=args.timeout)
            return None if done.exit_status == 0 else f"{address}:{port}: exit status {done.exit_status}"
    except (OSError, asyncssh.Error) as exc:  # OSError covers TimeoutError
        return f"{address}:{port}: {type(exc).__name__}: {exc}"


async def fan_out(args: argparse.Namespace) -> dict[str, object]:
    import asyncssh  # noqa: F401  # imported before the clock starts: the process's wall time has it

    started = time.perf_counter()
    pairs = [target.rsplit(":", 1) for target in args.targets]
    results = await asyncio.gather(*(one(address, int(port), args) for address, port in pairs))
    failed = [r for r in results if r is not None]
    return {"ok": len(results) - len(failed), "failed": failed, "connected_s": time.perf_counter() - started}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--user", required=True)
    parser.add_argument("--key", required=True, help="the client's private key")
    parser.add_argument("--known-hosts", required=True)
    parser.add_argument("--timeout", type=float, default=60.0, help="connect and command bound, seconds")
    parser.add_argument("targets", nargs="+", metavar="ADDRESS:PORT")
    args = parser.parse_args()
    result = asyncio.run(fan_out(args))
    print(json.dumps(result))
    return 1 if result["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
