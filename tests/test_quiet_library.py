"""The library is quiet in an application that configured no logging, and loud in one that did.

Each case runs a fresh interpreter (logging's state is per process): a session whose start fails
logs the agent's standard error at warning, which without a handler of the library's own would
reach stderr through ``logging.lastResort``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

FAILED_START = textwrap.dedent(
    """
    import sys
    import anyio
    {configure}
    from remote_acp import RemoteAcpError, SessionOptions, open_session

    command = [sys.executable, "-m", "remote_acp.testing.scripted_agent",
               "--crash-at", "initialize", "--exit-code", "7", "--stderr", "fatal: boom"]

    async def main() -> None:
        with anyio.fail_after(30):
            try:
                async with open_session("/", SessionOptions(command=command, stop_grace_ms=1000)):
                    raise SystemExit("the session started")
            except RemoteAcpError as error:
                print(error.kind.value)

    anyio.run(main)
    import logging
    logging.getLogger("hostinv.inventory").warning("a hostinv warning")
    """
)


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )


def test_without_logging_configured_a_failed_start_prints_nothing() -> None:
    done = run(FAILED_START.format(configure="import hostinv"))
    assert (done.returncode, done.stdout, done.stderr) == (0, "port_exit\n", "")


def test_with_logging_configured_the_records_still_arrive() -> None:
    configure = "import hostinv, logging; logging.basicConfig(format='%(name)s %(levelname)s %(message)s')"
    done = run(FAILED_START.format(configure=configure))
    assert done.returncode == 0 and done.stdout == "port_exit\n"
    assert "remote_acp.session WARNING agent stderr: fatal: boom" in done.stderr.splitlines()
    assert "hostinv.inventory WARNING a hostinv warning" in done.stderr.splitlines()
