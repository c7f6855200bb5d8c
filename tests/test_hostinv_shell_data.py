"""The data line the probe script and the session script carry their data in
(:mod:`hostinv.shell_data`): plain characters and octal escapes only, decoded back byte for byte
by every POSIX sh here."""

from __future__ import annotations

import re
import shlex
import subprocess

import pytest

from hostinv.shell_data import PLAIN, data_line
from tests.support.probe_run import RUN_TIMEOUT_S, SHELLS

# Every byte but NUL (no shell variable holds one), as a str holding surrogate escapes for the
# bytes that are no UTF-8, and a character that is.
EVERY_BYTE = bytes(range(1, 256)).decode("utf-8", "surrogateescape") + "\u2603"


def test_the_line_is_plain_characters_and_octal_escapes_only() -> None:
    line = data_line("_t_data", [f"_t_v={shlex.quote(EVERY_BYTE)}", "_t_complete=1"])
    assert line.startswith("_t_data='") and line.endswith("'")
    body = line[len("_t_data='") : -1]
    assert re.fullmatch(r"(?:[A-Za-z0-9/._,:+=@%-]|\\0[0-7]{3})*", body)
    assert {chr(b) for b in PLAIN} == set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/._,:+=@%-")


@pytest.mark.parametrize("name", ["", "1a", "a-b", "a b", "a'", "é"])
def test_the_variable_must_be_a_shell_name(name: str) -> None:
    with pytest.raises(ValueError, match="shell variable"):
        data_line(name, ["x=1"])


@pytest.mark.process
@pytest.mark.parametrize("shell_argv", SHELLS)
def test_every_shell_decodes_it_byte_for_byte(shell_argv: list[str]) -> None:
    line = data_line("_t_data", [f"_t_v={shlex.quote(EVERY_BYTE)}", "_t_complete=1"])
    script = (
        line + "\n"
        '_t_d=$(printf \'%b.\' "$_t_data") && eval "${_t_d%.}" && [ "${_t_complete-}" = 1 ] || exit 9\n'
        'printf %s "$_t_v"\n'
    )
    done = subprocess.run(
        [*shell_argv, "-c", script], capture_output=True, timeout=RUN_TIMEOUT_S, check=False, env={"LC_ALL": "C"}
    )
    assert (done.returncode, done.stderr) == (0, b"")
    assert done.stdout == EVERY_BYTE.encode("utf-8", "surrogateescape")
