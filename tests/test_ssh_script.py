"""The remote script: as data, and run locally with ``sh -c SCRIPT``.

The script is an ordinary POSIX sh script reading stdin, so its promises (the workspace and the
command words arrive intact, a failing ``cd`` never runs the command, the environment comes over
stdin, exit statuses and signals are reported) are proven by running it locally. Those runs are
slow-ish (the script's watchdog polls once a second), so they are started together once per
module and each test reads its own result.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from remote_acp.errors import ErrorKind
from remote_acp.targets.ssh import (
    Destination,
    SshSettings,
    env_preamble,
    remote_script,
    ssh_argv,
)
from tests.support.orphans import MARKER_NAME, kill_marked
from tests.support.ssh_build import (
    RUN_TIMEOUT_S,
    SIGNAL_MARK,
    WORKSPACE_MARK,
    line_after_session_mark,
    raises_kind,
    shells,
)

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from pathlib import Path


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
PRINT_ENV_AND_STDIN = (
    "import os,sys,json; data = sys.stdin.buffer.read(); "
    "print(json.dumps({'env': dict(os.environ), 'stdin': data.hex()}))"
)
# Values carried in the environment preamble: quotes, newlines, expansions, blanks, non-ASCII.

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
# What follows the preamble on stdin: protocol bytes, things that look like shell, binary.
STDIN_REST = b'{"jsonrpc":"2.0","id":1,"method":"initialize"}\nexport X=1; _RA_COMPLETE=1\n\x00\xff\xfe tail'

ENV_MESSAGE = "remote-acp: the environment sent on stdin did not arrive whole"

# -- remote_script as data ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "workspace",
    [
        "/srv/my workspace",
        "/srv/it's",
        '/srv/"dq"',
        "/srv/$HOME",
        "/srv/a;b",
        "/srv/-x",
        "/srv/*",
        "/srv/ws",
        "/" + HOSTILE_DIR,
    ],
)
def test_remote_script_enters_the_quoted_workspace_with_cd_dash_dash_first(workspace: str) -> None:
    script = remote_script(workspace, ["agent"], token="t0")
    head = script[: script.index(" 2>/dev/null || { printf ")]
    assert head == f"cd -- {shlex.quote(workspace)}"
    if any(c in workspace for c in " '\"$;*\n\\`"):
        assert head.startswith("cd -- '")  # single-quoted: nothing in it expands
    # Tokenised as a shell would, the words are exactly `cd`, `--` and the workspace.
    assert shlex.split(head) == ["cd", "--", workspace]
    # The failure branch exits before anything else in the script.
    assert script.index("exit 97; }\n") < script.index("_ra_tree() {")


def test_remote_script_with_a_plain_workspace_is_cd_then_supervisor() -> None:
    script = remote_script("/srv/ws dir", ["agent", "--acp"], token="abc123", kill_grace_s=5)
    lines = script.split("\n")
    assert lines[0] == (
        "cd -- '/srv/ws dir' 2>/dev/null || "
        "{ printf '%s\\n' 'remote-acp: workspace unavailable: /srv/ws dir' >&2; exit 97; }"
    )
    assert "dd " not in script and "_RA_ENV" not in script  # no environment, no preamble reader
    assert line_after_session_mark(script) == ["exec agent --acp"]
    assert "{ export _RA_SESSION=abc123." in lines
    assert 'grep -l -s -a "_RA_SESSION=abc123\\."' in script
    assert 'while [ "$_ra_n" -lt 5 ]; do' in script
    assert script.rstrip().endswith('exit "$_ra_rc"')
    assert "__" not in script.replace("__pycache__", "")  # every placeholder filled


def test_remote_script_list_command_is_quoted_word_by_word() -> None:
    command = ["/opt/my agent/bin/agent", *HOSTILE_WORDS]
    script = remote_script("/w", command, token="t")
    fragment = "\n".join(line_after_session_mark(script))
    assert fragment == "exec " + shlex.join(command)
    assert shlex.split(fragment) == ["exec", *command]


def test_remote_script_string_command_goes_verbatim() -> None:
    for command in ["echo a && echo b", "FOO=1 exec agent --acp 2>>log", "if true; then\n  agent\nfi", "a | b; c"]:
        script = remote_script("/w", f"  {command}\n ", token="t")
        assert line_after_session_mark(script) == command.split("\n")


def test_remote_script_list_command_that_looks_like_a_fragment_stays_one_word() -> None:
    script = remote_script("/w", ["echo hi && touch pwned"], token="t")
    assert line_after_session_mark(script) == ["exec 'echo hi && touch pwned'"]


def test_remote_script_refuses_an_empty_list_command() -> None:
    with raises_kind(ErrorKind.AGENT_NOT_FOUND):
        remote_script("/w", [])
    with raises_kind(ErrorKind.AGENT_NOT_FOUND):
        remote_script("/w", ["", "x"])


def test_remote_script_reads_exactly_the_preamble_bytes() -> None:
    script = remote_script("/w", ["agent"], 128, token="t")
    lines = script.split("\n")
    assert lines[1].startswith("command -v dd >/dev/null 2>&1 || {")
    assert lines[1].endswith("exit 98; }")
    assert lines[2].startswith('_RA_ENV=$(dd bs=1 count=128 2>/dev/null) && command eval "$_RA_ENV" && ')
    assert lines[2].endswith(f"{{ echo '{ENV_MESSAGE}' >&2; exit 98; }}")
    assert lines[3] == "unset _RA_ENV _RA_COMPLETE"


def test_remote_script_token_is_random_by_default() -> None:
    tokens = {re.findall(r"_RA_SESSION=([0-9a-f]+)\.\n", remote_script("/w", ["a"]))[0] for _ in range(20)}
    assert len(tokens) == 20
    assert all(len(token) == 16 for token in tokens)


@pytest.mark.parametrize("shell", shells(), ids=lambda shell: "-".join(shell))
def test_remote_script_is_valid_posix_sh(shell: list[str]) -> None:
    commands: list[str | list[str]] = [
        [sys.executable, "-c", PRINT_CWD_AND_ARGS, *HOSTILE_WORDS],
        ["agent"],
        "echo a && echo b",
        "if true; then\n  exec agent --acp\nfi",
        "exit 7",
    ]
    for workspace in ["/srv/ws", "/" + HOSTILE_DIR]:
        for command in commands:
            for env_bytes in (0, 64, 4096):
                script = remote_script(workspace, command, env_bytes, kill_grace_s=2)
                done = subprocess.run([*shell, "-n", "-c", script], capture_output=True, timeout=RUN_TIMEOUT_S)
                assert done.returncode == 0, (workspace, command, env_bytes, done.stderr)
                assert done.stdout == b"", done.stdout


# -- remote_script, run locally -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Case:
    argv: tuple[str, ...]
    stdin: bytes = b""


@dataclass(frozen=True, slots=True)
class Ran:
    code: int
    out: bytes
    err: str


@dataclass(frozen=True, slots=True)
class Runs:
    root: Path
    results: Mapping[str, Ran]

    def __getitem__(self, name: str) -> Ran:
        return self.results[name]


def _run(case: Case, env: Mapping[str, str]) -> Ran:
    proc = subprocess.Popen(
        case.argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env),
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(case.stdin, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return Ran(proc.returncode, out, err.decode(errors="replace"))


def _cases(root: Path) -> dict[str, Case]:
    hostile = root / HOSTILE_DIR
    hostile.mkdir()
    missing = root / "missing -dir 'q' \"dq\" $x; y"
    a_file = root / "plain-file"
    a_file.write_text("not a directory\n")
    preamble = env_preamble(ENV_VALUES)
    py = sys.executable

    def sh(script: str, stdin: bytes = b"", shell: str = "sh") -> Case:
        return Case((shell, "-c", script), stdin)

    hostile_command = [py, "-c", PRINT_CWD_AND_ARGS, *HOSTILE_WORDS]
    hostile_script = remote_script(str(hostile), hostile_command, token="tokhostile")
    # Every script running at once needs its own session token: a finished script's cleanup kills
    # whatever carries its token (in real use tokens are random).
    via_ssh = ssh_argv(
        "ssh",
        Destination("build"),
        SshSettings(),
        remote_script(str(hostile), hostile_command, token="tokhostilelogin"),
        config="/c",
    )
    env_script = remote_script(str(hostile), [py, "-c", PRINT_ENV_AND_STDIN], len(preamble), token="tokenv")
    cases = {
        "hostile": sh(hostile_script),
        "hostile_via_login_shell": sh(via_ssh[-1]),
        "missing_string": sh(remote_script(str(missing), f"touch {shlex.quote(str(root / 'ran-string'))}")),
        "missing_list": sh(remote_script(str(missing), [py, "-c", f"open({str(root / 'ran-list')!r}, 'w')"])),
        "missing_with_env": sh(
            remote_script(str(missing), f"touch {shlex.quote(str(root / 'ran-env'))}", len(preamble)), preamble
        ),
        "file_workspace": sh(remote_script(str(a_file), f"touch {shlex.quote(str(root / 'ran-file'))}")),
        "fragment": sh(remote_script(str(hostile), "echo a && echo b")),
        "fragment_pipeline": sh(remote_script(str(root), "printf '%s\\n' one two three | sort -r; echo \"$PWD\"")),
        "env": sh(env_script, preamble + STDIN_REST),
        "env_cat": sh(remote_script(str(root), "cat", len(preamble)), preamble + STDIN_REST),
        "env_cut_in_name": sh(env_script, preamble[:5]),
        "env_empty_stdin": sh(env_script, b""),
        "env_cut_before_complete": sh(env_script, preamble[: preamble.index(b"; _RA_COMPLETE")]),
        "exit_7": sh(remote_script(str(root), "exit 7")),
        "exit_7_list": sh(remote_script(str(root), [py, "-c", "raise SystemExit(7)"])),
        "not_found": sh(remote_script(str(root), ["remote-acp-no-such-program-xyz", "--acp"])),
        "killed_9": sh(remote_script(str(root), ["sh", "-c", "kill -KILL $$"])),
        "killed_15": sh(remote_script(str(root), ["sh", "-c", "kill -TERM $$"])),
        "placeholders": sh(remote_script(str(root), ["printf", "%s\\n", *PLACEHOLDER_WORDS], token="tokph")),
        "backslash_workspace": sh(remote_script(str(root / "no\\cwhere"), "true")),
    }
    if shutil.which("dash"):
        # Cut inside a quoted value: dash treats the syntax error in `eval` as fatal to the shell.
        cut = preamble.index(b"QUOTED='") + len(b"QUOTED='it")
        cases["env_cut_in_quote_dash"] = sh(env_script, preamble[:cut], shell="dash")
    return cases


PLACEHOLDER_WORDS = ["__TOKEN__", "__GRACE__", "__SIGNAL_MARK__", "__COMMAND__"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    """Run every script case at once (each takes up to a second of watchdog polling), then check
    that none of them, nor anything they started, is still alive."""
    root = tmp_path_factory.mktemp("remote script")
    cases = _cases(root)
    marker = f"ssh-build-{uuid.uuid4().hex}"
    env = {**os.environ, MARKER_NAME: marker}
    try:
        with ThreadPoolExecutor(max_workers=len(cases)) as pool:
            futures = {name: pool.submit(_run, case, env) for name, case in cases.items()}
            results = {name: future.result() for name, future in futures.items()}
    finally:
        leftovers = kill_marked(marker)
    assert not leftovers, f"script processes outlived their run: {leftovers}"
    yield Runs(root, results)


def test_hostile_workspace_and_words_arrive_intact(runs: Runs) -> None:
    ran = runs["hostile"]
    assert (ran.code, ran.err) == (0, "")
    cwd, args = json.loads(ran.out)
    assert cwd == str(runs.root / HOSTILE_DIR)
    assert args == HOSTILE_WORDS
    assert not (runs.root / HOSTILE_DIR / "pwned").exists()


def test_hostile_script_survives_the_remote_login_shell(runs: Runs) -> None:
    assert runs["hostile_via_login_shell"] == runs["hostile"]


@pytest.mark.parametrize(("case", "ran_marker"), [("missing_string", "ran-string"), ("missing_list", "ran-list")])
def test_missing_workspace_exits_97_and_never_runs_the_command(runs: Runs, case: str, ran_marker: str) -> None:
    ran = runs[case]
    missing = runs.root / "missing -dir 'q' \"dq\" $x; y"
    assert ran.code == 97
    assert ran.out == b""
    assert ran.err == f"{WORKSPACE_MARK} {missing}\n"
    assert not (runs.root / ran_marker).exists()


def test_missing_workspace_exits_97_before_reading_the_environment(runs: Runs) -> None:
    ran = runs["missing_with_env"]
    assert ran.code == 97
    assert ran.err.startswith(WORKSPACE_MARK)
    assert ENV_MESSAGE not in ran.err
    assert not (runs.root / "ran-env").exists()


def test_workspace_that_is_a_file_exits_97(runs: Runs) -> None:
    ran = runs["file_workspace"]
    assert (ran.code, ran.out) == (97, b"")
    assert ran.err == f"{WORKSPACE_MARK} {runs.root / 'plain-file'}\n"
    assert not (runs.root / "ran-file").exists()


def test_missing_workspace_message_keeps_backslashes(runs: Runs) -> None:
    ran = runs["backslash_workspace"]
    assert ran.code == 97
    where = runs.root / "no\\cwhere"
    assert ran.err == f"{WORKSPACE_MARK} {where}\n"


def test_string_fragment_runs_verbatim_in_the_workspace(runs: Runs) -> None:
    assert runs["fragment"] == Ran(0, b"a\nb\n", "")
    assert runs["fragment_pipeline"] == Ran(0, f"two\nthree\none\n{runs.root}\n".encode(), "")


def test_environment_is_imported_and_the_rest_of_stdin_reaches_the_command(runs: Runs) -> None:
    ran = runs["env"]
    assert (ran.code, ran.err) == (0, "")
    seen = json.loads(ran.out)
    assert {name: seen["env"].get(name) for name in ENV_VALUES} == ENV_VALUES
    assert bytes.fromhex(seen["stdin"]) == STDIN_REST
    assert seen["env"]["_RA_SESSION"] == "tokenv."
    assert "_RA_ENV" not in seen["env"]
    assert "_RA_COMPLETE" not in seen["env"]


def test_environment_preamble_then_cat_passes_stdin_through_byte_for_byte(runs: Runs) -> None:
    assert runs["env_cat"] == Ran(0, STDIN_REST, "")


@pytest.mark.parametrize("case", ["env_cut_in_name", "env_empty_stdin", "env_cut_before_complete"])
def test_cut_short_preamble_exits_98_with_a_clear_message(runs: Runs, case: str) -> None:
    ran = runs[case]
    assert ran.code == 98
    assert ran.out == b""
    assert ran.err.rstrip("\n").endswith(ENV_MESSAGE)
    for value in ENV_VALUES.values():  # a value never echoed back in the message
        if len(value) > 3:
            assert value not in ran.err


def test_preamble_cut_inside_a_quote_exits_98_under_dash(runs: Runs) -> None:
    if "env_cut_in_quote_dash" not in runs.results:
        pytest.skip("dash is not installed")
    ran = runs["env_cut_in_quote_dash"]
    assert ran.code == 98
    assert ENV_MESSAGE in ran.err


@pytest.mark.parametrize("case", ["exit_7", "exit_7_list"])
def test_exit_status_is_propagated(runs: Runs, case: str) -> None:
    assert runs[case] == Ran(7, b"", "")


def test_missing_program_exits_127_with_the_shell_message(runs: Runs) -> None:
    ran = runs["not_found"]
    assert ran.code == 127
    assert "remote-acp-no-such-program-xyz" in ran.err
    assert "not found" in ran.err
    assert SIGNAL_MARK not in ran.err


@pytest.mark.parametrize(("case", "signum"), [("killed_9", 9), ("killed_15", 15)])
def test_command_killed_by_a_signal_exits_128_plus_n_with_the_mark(runs: Runs, case: str, signum: int) -> None:
    ran = runs[case]
    assert ran.code == 128 + signum
    assert ran.out == b""
    # The mark is the last line (the shell may first say "Killed" or "Terminated" itself).
    assert ran.err.splitlines()[-1] == f"{SIGNAL_MARK} {signum}"


def test_template_placeholders_in_a_command_arrive_intact(runs: Runs) -> None:
    ran = runs["placeholders"]
    assert ran.code == 0
    assert ran.out.decode().splitlines() == PLACEHOLDER_WORDS
