"""How the session's script and its data reach ``/bin/sh`` on the host, whatever the login shell.

The user's login shell (sh, bash, zsh, ksh, ash, fish, csh, tcsh...) gets one fixed line,
:data:`BOOTSTRAP` under ``sh -c``, with no data in it: no quote that shells read differently, no
backslash (fish reads ``\\'`` and ``\\\\`` inside single quotes), no ``!`` (csh history), no
newline (csh refuses one inside quotes), and its one ``$`` inside single quotes, where no shell
expands it. That line has ``/bin/sh`` read one line from stdin and evaluate it: the *loader*
(:func:`stdin_prefix`), which reads the script a known number of lines at a time with the
``read`` builtin (it never reads ahead, unlike a shell reading a script from a pipe: dash and
BusyBox read in blocks) and runs it only when its last line, the end mark, arrived. So the
script and every byte of data reach ``/bin/sh`` and nothing else, whatever the login shell.

The data (workspace, command words or fragment, carried environment) sit in the script as one
line, ``_ra_data='...'`` (:func:`data_line`), of octal escapes (``\\0ooo``, decoded by ``printf
%b``) and harmless characters (:data:`hostinv.shell_data.PLAIN`), the encoding a probe's script
carries its data in too. Decoded, it is a POSIX sh snippet of assignments quoted by
:func:`shlex.quote`. No line of the prefix means anything but an assignment to a
shell, whichever shell reads it and from wherever it starts reading: a dotfile that reads some of
stdin can make the session fail, never run a word of the data.

What the script does once it runs is :mod:`remote_acp.targets.ssh.script`'s.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Final

from hostinv import shell_data

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "ANOTHER_SHELL",
    "BOOTSTRAP",
    "END_MARK",
    "EXIT_INCOMPLETE",
    "INCOMPLETE_MARK",
    "data_line",
    "stdin_prefix",
]

BOOTSTRAP: Final = 'IFS= read -r l && eval "$l"'
"""What ``/bin/sh -c`` runs on the host: read the loader line from stdin and run it. Fixed."""
END_MARK: Final = "# remote-acp end"
"""The script's last line: the loader runs what it read only once this arrived."""
EXIT_INCOMPLETE: Final = 98
INCOMPLETE_MARK: Final = "remote-acp: the session script sent on stdin did not arrive whole"
ANOTHER_SHELL: Final = " (another shell, started by a login script, read it as its commands)"


def data_line(workspace: str, command: str | Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """The script's one data line: ``_ra_data='...'``, the session's data as a POSIX sh snippet
    of assignments, encoded so that no shell reads anything in it (see the module docstring).

    A str holding surrogate escapes (as ``os.environ`` gives for undecodable bytes) travels as its
    original bytes.
    """
    lines = [f"_ra_ws={shlex.quote(workspace)}"]
    if isinstance(command, str):
        lines += [f"_ra_cmd={shlex.quote(command.strip())}", "_ra_list="]
    else:
        # Here, not at the top: SshSettings' checks import the script modules, and a probe-only
        # check loads the settings without the launch machinery.
        from ..launch import command_argv

        lines += [f"set -- {shlex.join(command_argv(list(command)))}", "_ra_cmd=", "_ra_list=1"]
    exports = " ".join(f"{name}={shlex.quote(value)}" for name, value in (env or {}).items())
    lines += [f"_ra_env={shlex.quote('export ' + exports) if exports else ''}", "_ra_complete=1"]
    return shell_data.data_line("_ra_data", lines)


def stdin_prefix(script: str, *, whole_input: bool = False) -> bytes:
    """What goes on stdin ahead of the protocol: the loader line, then ``script`` (which must end
    with :data:`END_MARK` and a newline, as
    :func:`~remote_acp.targets.ssh.script.remote_script`'s does).

    The loader reads exactly the script's lines with ``read`` (byte by byte from a pipe, in every
    sh), and runs them only when the last one is the end mark; anything else (stdin ended early,
    a dotfile ate some of it) exits :data:`EXIT_INCOMPLETE` with :data:`INCOMPLETE_MARK`, or waits
    for lines that never come, until the ready bound ends the session.

    ``whole_input``: nothing follows the script on stdin until the script asks for it (it prints a
    ready marker and the client sends nothing more before it), so the loader may read the script
    in one go: ``head -c`` with its size, a read or two instead of one per byte (a byte costs
    ``read`` about 2 us of host CPU, and a check's script with its probe is 15 KB). Where ``head``
    is missing or knows no ``-c``, or what it read does not end with the end mark, the line loop
    reads what is left, as without it.
    """
    if not script.endswith(END_MARK + "\n"):
        raise ValueError("the script must end with the end mark")
    count = script.count("\n")
    end = shlex.quote(END_MARK)
    at_once = (
        "if command -v head >/dev/null 2>&1; then "
        f"_ra_s=$(head -c {len(script.encode())} 2>/dev/null; echo .); _ra_s=${{_ra_s%.}}; "
        f'case $_ra_s in *"$_ra_nl"{end}"$_ra_nl") _ra_n={count}; _ra_l={end} ;; *) _ra_s= ;; esac; fi; '
        if whole_input
        else ""
    )
    # Only the bootstrap sets ``l``: without it, another shell (one a login script started in
    # place of the login shell) is reading stdin as its own commands.
    loader = (
        f"if [ -z \"${{l+1}}\" ]; then printf '%s\\n' {shlex.quote(INCOMPLETE_MARK + ANOTHER_SHELL)} >&2; "
        f"exit {EXIT_INCOMPLETE}; fi; "
        "_ra_nl=$(printf '\\n.'); _ra_nl=${_ra_nl%.}; _ra_s=; _ra_l=; _ra_n=0; "
        + at_once
        + f'while [ "$_ra_n" -lt {count} ] && IFS= read -r _ra_l; do _ra_s=$_ra_s$_ra_l$_ra_nl; '
        "_ra_n=$((_ra_n + 1)); done; "
        f'if [ "$_ra_n" -eq {count} ] && [ "$_ra_l" = {end} ]; then unset _ra_l _ra_n _ra_nl; eval "$_ra_s"; '
        f"else printf '%s\\n' {shlex.quote(INCOMPLETE_MARK)} >&2; exit {EXIT_INCOMPLETE}; fi"
    )
    return (loader + "\n" + script).encode("ascii")
