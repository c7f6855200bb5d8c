"""The agent every benchmark drives: the scriptable agent (:mod:`remote_acp.testing.scripted_agent`),
how it is started here and on a lab's hosts, and the prompts and flags the benchmarks give it.

Every contender of a benchmark drives the same agent process: locally it is run by the
benchmark's own interpreter; a lab's throwaway user runs it through :func:`lab_agent_script`.
"""

from __future__ import annotations

import shlex
import sys
from typing import Final

__all__ = [
    "AGENT_MODULE",
    "IGNORES_SIGTERM_AND_EOF",
    "SYSTEM_PYTHON",
    "agent_argv",
    "agent_command",
    "bulk_prompt",
    "lab_agent_script",
]

AGENT_MODULE: Final = "remote_acp.testing.scripted_agent"
SYSTEM_PYTHON: Final = "/usr/bin/python3"
"""Runs the throwaway users' agent: the benchmark's interpreter may sit where they cannot reach."""
IGNORES_SIGTERM_AND_EOF: Final = ("--ignore-sigterm", "--no-stdin-eof-exit")
"""Flags of an agent that only a SIGKILL ends (the teardown benchmark's stubborn agent)."""

_LAB_AGENT_SCRIPT: Final = """#!/bin/sh
case "$1" in --version) echo "scripted-agent 1.0.0"; exit 0 ;; esac
PYTHONPATH={pythonpath} exec {python} -m {module} "$@"
"""


def agent_argv(*extra: str) -> list[str]:
    """The scriptable agent, run by the benchmark's interpreter (the same for every contender)."""
    return [sys.executable, "-m", AGENT_MODULE, *extra]


def agent_command(*extra: str) -> str:
    return shlex.join(agent_argv(*extra))


def bulk_prompt(chunks: int) -> str:
    """The prompt whose reply is ``chunks`` one-character chunks, written as fast as the agent can."""
    return f"@bulk={chunks}"


def lab_agent_script() -> str:
    """The agent a lab's throwaway user runs: a shell script running the scriptable agent with
    :data:`SYSTEM_PYTHON` and a copy of this checkout's packages every user can read on
    ``PYTHONPATH`` (the agent needs nothing but the standard library and our package)."""
    from integration.users import agent_pythonpath

    return _LAB_AGENT_SCRIPT.format(pythonpath=agent_pythonpath(), python=SYSTEM_PYTHON, module=AGENT_MODULE)
