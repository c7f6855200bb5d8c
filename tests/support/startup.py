"""What ``remote-acp --version`` (and optionally more imports after it) loads, from a fresh
interpreter: for tests that keep machinery out of the start-up path."""

from __future__ import annotations

import json
import subprocess
import sys

__all__ = ["modules_after_version"]


def modules_after_version(then_import: str = "") -> list[str]:
    """The modules loaded once ``remote-acp --version`` ran (and ``then_import``, a comma-separated
    list of modules imported after it), sorted. Fails unless the version was printed."""
    probe = (
        "import json, sys, runpy\n"
        "sys.argv = ['remote-acp', '--version']\n"
        "try:\n"
        "    runpy.run_module('remote_acp.cli.main', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n" + (f"import {then_import}\n" if then_import else "") + "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert "remote-acp, version" in done.stdout
    loaded: list[str] = json.loads(done.stdout.splitlines()[-1])
    return loaded
