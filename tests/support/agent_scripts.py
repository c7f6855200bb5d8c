"""The stand-in agents the tests install on a host, written once.

:func:`host_agent_script` is the shell script a test puts where a host's agent command would be:
it answers ``--version`` at once, as a probe asks it, and otherwise runs shell lines of the test's
choosing, in which ``agent ARGS...`` becomes the scripted agent
(:mod:`remote_acp.testing.scripted_agent`) with those arguments. :data:`RECORDING_AGENT` is a
program for ``python -c`` that notes what it was started with before it becomes the scripted agent.

A lab's throwaway user runs them with :data:`SYSTEM_PYTHON` (the suite's own interpreter may sit
where that user cannot reach) and a copy of our packages every user can read on ``PYTHONPATH``
(:func:`integration.users.agent_pythonpath`).
"""

from __future__ import annotations

import shlex
import shutil
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import os

__all__ = [
    "RECORDING_AGENT",
    "RECORD_PID",
    "SCRIPTED_AGENT_MODULE",
    "SYSTEM_PYTHON",
    "host_agent_argv",
    "host_agent_script",
]

SCRIPTED_AGENT_MODULE = "remote_acp.testing.scripted_agent"

SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")
"""The system's python, which every user can run (``None`` where there is none)."""

RECORD_PID = 'mkdir -p "$HOME/pids"; echo $$ > "$HOME/pids/pid-$$"'
"""A line for :func:`host_agent_script`: note the agent's pid, one file per agent, under ``~/pids``
(the agent keeps it: ``agent`` execs)."""


def host_agent_script(
    *lines: str, python: str, pythonpath: str | os.PathLike[str] | None = None, version: str = "scripted 1.0"
) -> str:
    """A ``#!/bin/sh`` script standing in for an agent's command on a host.

    Asked ``--version``, it prints ``version`` and exits. Otherwise it runs ``lines`` (default:
    ``agent``, the scripted agent with no argument), shell lines in which ``agent ARGS...`` execs
    the scripted agent with ARGS, run by ``python`` with ``pythonpath`` on ``PYTHONPATH``. The
    script's own arguments are ``$@`` there, and reach the agent only where a line passes them.
    """
    env = f"env PYTHONPATH={shlex.quote(str(pythonpath))} " if pythonpath is not None else ""
    run = f'agent() {{ exec {env}{shlex.quote(python)} -m {SCRIPTED_AGENT_MODULE} "$@"; }}'
    version_line = f'case "$1" in --version) echo {shlex.quote(version)}; exit 0 ;; esac'
    return "\n".join(["#!/bin/sh", version_line, run, *(lines or ["agent"])]) + "\n"


def host_agent_argv(*args: str, python: str, pythonpath: str | os.PathLike[str]) -> list[str]:
    """The scripted agent with ``args`` as a command (no script on the host): run by ``python`` with
    ``pythonpath`` on ``PYTHONPATH``."""
    return ["env", f"PYTHONPATH={pythonpath}", python, "-m", SCRIPTED_AGENT_MODULE, *args]


RECORDING_AGENT = (
    "import json, os, sys; "
    "open(sys.argv[1], 'w').write(json.dumps({'cwd': os.getcwd(), 'argv': sys.argv[2:], 'env': dict(os.environ)})); "
    f"os.execv(sys.executable, [sys.executable, '-m', '{SCRIPTED_AGENT_MODULE}'])"
)
"""``python -c RECORDING_AGENT RECORD [WORDS...]``: writes its working directory, the words it was
given and its environment to the file RECORD as JSON, then becomes the scripted agent. It holds no
double quote, ``$``, backquote or backslash, so a shell's double quotes carry it unchanged."""
