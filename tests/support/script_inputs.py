"""What the remote script's tests feed it (tests/test_ssh_script*.py): command words and a
workspace name that break careless quoting, a carried environment of awkward values, the login
shells, and the line a login shell is given."""

from __future__ import annotations

from remote_acp.targets.ssh.argv import ssh_argv
from remote_acp.targets.ssh.destination import Destination
from remote_acp.targets.ssh.loader import BOOTSTRAP
from remote_acp.targets.ssh.settings import SshSettings

__all__ = ["ENV_VALUES", "HOSTILE_DIR", "HOSTILE_WORDS", "LOGIN_SHELLS", "PRINT_CWD_AND_ARGS", "login_line"]

# Words a list command must deliver intact: quotes, expansions, separators, globs, blanks, newlines.
HOSTILE_WORDS = [
    "it's",
    'say "hi"',
    "$HOME",
    "${PATH}",
    "`id`",
    "$(id)",
    "a; touch pwned",
    "x && y || z",
    "two  spaces",
    "*",
    "?.py",
    "~",
    "line1\nline2",
    "tab\there",
    "-n",
    "--",
    "",
    "back\\slash",
    "#not-a-comment",
    "ünïcödé",
    "> redirect",
]


# A workspace directory name with spaces, quotes, `$`, `;`, a backtick, a glob, a backslash, a
# newline and a leading dash.
HOSTILE_DIR = '-ws it\'s "dq" $HOME; `id` * back\\slash new\nline'


PRINT_CWD_AND_ARGS = "import os,sys,json; print(json.dumps([os.getcwd(), sys.argv[1:]]))"


# Values carried in the environment: quotes, newlines, expansions, blanks, non-ASCII.
ENV_VALUES = {
    "QUOTED": 'it\'s "quoted"',
    "DOLLAR": "$HOME ${PATH} `id` $(id) \\$x",
    "MULTI": "line1\nline2\n",
    "EMPTY": "",
    "BLANKS": "  lead and trail  ",
    "UNICODE": "ünïcödé ✓",
    "GLOB": "* ?",
    "SEMI": "a; exit 3",
}


LOGIN_SHELLS = ["sh", "dash", "bash", "zsh", "ksh", "fish", "csh", "tcsh", "busybox ash"]


def login_line() -> str:
    """The line the login shell is given (ssh's last word)."""
    return ssh_argv("ssh", Destination("build"), SshSettings(), BOOTSTRAP, config="/c")[-1]
