"""A reconnect's login: the script a new ssh connection runs to attach to a detached session.

It travels as the session script does (:func:`~remote_acp.targets.ssh.loader.stdin_prefix`, with
``whole_input``: nothing follows it on stdin until it prints its marker) and begins the same way:
a first line that exits :data:`~remote_acp.targets.ssh.loader.EXIT_INCOMPLETE` when a login script
ate the loader line, the PATH fallback and the check of the tools it runs
(:data:`ATTACH_TOOLS`, :data:`~remote_acp.targets.ssh.script.EXIT_NO_TOOL`), and the user's slot
directory found, made and checked as every session finds it
(:func:`hostinv.slots.own_slot_dir_lines`). Then it prints the ready marker on a
line of its own and reads one line, ``go`` (else :data:`~remote_acp.targets.ssh.script.EXIT_NO_GO`);
the controller writes ``go`` and the attach request (``ID K J MODE SECRET``) in one write after
the marker, so a login script's noise never reaches the protocol. Then it is the attachment of
:mod:`.attach`, with its reply, frames and exit codes.
"""

from __future__ import annotations

from typing import Final

from hostinv.slots import PRIVATE, own_slot_dir_lines

from ..loader import END_MARK
from ..script import (
    SLOT_TOOLS,
    TOOL_FALLBACK_PATH,
    check_login_options,
    go_ahead_lines,
    loader_check_line,
    tool_lines,
)
from .attach import attach_script

__all__ = ["ATTACH_TOOLS", "attach_login_script"]

ATTACH_TOOLS: Final = ("cat", "sleep", "dd", "wc", "tail", "awk", *SLOT_TOOLS)
"""What the login and the attachment run besides builtins (and ``sha256sum`` where the session's
secret is stored hashed)."""


def attach_login_script(*, ready_marker: str, slot_prefix: str = PRIVATE, tool_path: str = TOOL_FALLBACK_PATH) -> str:
    """The reconnect's script (see the module docstring). ``ready_marker``: ASCII letters, digits
    and ``-``; ``slot_prefix``: the slot directory less the user id, as the session was started
    with; ``tool_path``: where the tools are looked for after the login's PATH.

    :raises ValueError: a marker, tool path or slot prefix
        :func:`~remote_acp.targets.ssh.script.remote_script` refuses too.
    """
    check_login_options(ready_marker=ready_marker, tool_path=tool_path, slot_prefix=slot_prefix)
    lines = [
        loader_check_line(),
        *tool_lines(ATTACH_TOOLS, tool_path),
        *own_slot_dir_lines(slot_prefix, out="_ra_base", scratch="_ra_sl"),
        *go_ahead_lines(ready_marker),
    ]
    return "\n".join(lines) + "\n" + attach_script(None) + END_MARK + "\n"
