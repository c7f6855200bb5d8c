"""The remote script, run locally with ``sh -c SCRIPT`` (the script as data is in
test_ssh_script_data).

The script is an ordinary POSIX sh script reading stdin, so its promises (the workspace and the
command words arrive intact, a failing ``cd`` never runs the command, the environment comes over
stdin, exit statuses and signals are reported) are proven by running it locally. Those runs are
slow-ish (the script's watchdog polls once a second), so they are started together once per
module and each test reads its own result.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from remote_acp.targets.ssh.loader import ANOTHER_SHELL, BOOTSTRAP, END_MARK, INCOMPLETE_MARK, stdin_prefix
from remote_acp.targets.ssh.script import TOOL_MARK, remote_script
from tests.support.orphans import MARKER_NAME, alive, kill_marked
from tests.support.script_inputs import (
    ENV_VALUES,
    HOSTILE_DIR,
    HOSTILE_WORDS,
    LOGIN_SHELLS,
    PRINT_CWD_AND_ARGS,
    login_line,
)
from tests.support.ssh_build import RUN_TIMEOUT_S, SIGNAL_MARK, WORKSPACE_MARK

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from pathlib import Path


PRINT_ENV_AND_STDIN = (
    "import os,sys,json; data = sys.stdin.buffer.read(); "
    "print(json.dumps({'env': dict(os.environ), 'stdin': data.hex()}))"
)

# What follows the prefix on stdin: protocol bytes, things that look like shell, binary.
STDIN_REST = b'{"jsonrpc":"2.0","id":1,"method":"initialize"}\nexport X=1; _RA_COMPLETE=1\n\x00\xff\xfe tail'

ENV_MESSAGE = INCOMPLETE_MARK


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
    py = sys.executable

    def sh(script: str, stdin: bytes = b"", shell: str = "sh", prefix: bytes | None = None) -> Case:
        """The script as the host runs it: ``sh -c BOOTSTRAP``, the prefix then ``stdin`` on stdin."""
        return Case((*shell.split(), "-c", BOOTSTRAP), (stdin_prefix(script) if prefix is None else prefix) + stdin)

    hostile_command = [py, "-c", PRINT_CWD_AND_ARGS, *HOSTILE_WORDS]
    hostile_script = remote_script(str(hostile), hostile_command, token="tokhostile")
    env_script = remote_script(str(hostile), [py, "-c", PRINT_ENV_AND_STDIN], ENV_VALUES, token="tokenv")
    env_prefix = stdin_prefix(env_script)
    after_loader = env_prefix.index(b"\n") + 1
    whole_prefix = stdin_prefix(env_script, whole_input=True)
    cases = {
        "hostile": sh(hostile_script),
        "missing_string": sh(remote_script(str(missing), f"touch {shlex.quote(str(root / 'ran-string'))}")),
        "missing_list": sh(remote_script(str(missing), [py, "-c", f"open({str(root / 'ran-list')!r}, 'w')"])),
        "file_workspace": sh(remote_script(str(a_file), f"touch {shlex.quote(str(root / 'ran-file'))}")),
        "fragment": sh(remote_script(str(hostile), "echo a && echo b")),
        "fragment_pipeline": sh(remote_script(str(root), "printf '%s\\n' one two three | sort -r; echo \"$PWD\"")),
        "env": sh(env_script, STDIN_REST),
        "env_cat": sh(remote_script(str(root), "cat", ENV_VALUES), STDIN_REST),
        "cut_after_loader": sh(env_script, prefix=env_prefix[:after_loader]),
        "cut_in_data": sh(env_script, prefix=env_prefix[: env_prefix.index(b"_ra_data='") + 40]),
        "cut_before_end": sh(env_script, prefix=env_prefix[: env_prefix.rindex(END_MARK.encode())]),
        # A login script that read one line: the bootstrap reads the script's first line instead.
        "loader_eaten": sh(env_script, prefix=env_prefix[after_loader:]),
        # A login script that exec'd another shell, which reads stdin as its commands.
        "another_shell": Case(("sh",), env_prefix),
        "exit_7": sh(remote_script(str(root), "exit 7")),
        "exit_7_list": sh(remote_script(str(root), [py, "-c", "raise SystemExit(7)"])),
        "not_found": sh(remote_script(str(root), ["remote-acp-no-such-program-xyz", "--acp"])),
        "killed_9": sh(remote_script(str(root), ["sh", "-c", "kill -KILL $$"])),
        "killed_15": sh(remote_script(str(root), ["sh", "-c", "kill -TERM $$"])),
        "placeholders": sh(remote_script(str(root), ["printf", "%s\\n", *PLACEHOLDER_WORDS], token="tokph")),
        "backslash_workspace": sh(remote_script(str(root / "no\\cwhere"), "true")),
        "ready_go": sh(
            remote_script(str(root), [py, "-c", PRINT_ENV_AND_STDIN], token="tokgo", ready_marker="m-go"),
            b"go\n" + STDIN_REST,
        ),
        "ready_no_go": sh(
            remote_script(
                str(root), f"touch {shlex.quote(str(root / 'ran-nogo'))}", token="toknogo", ready_marker="m-n"
            )
        ),
        # The preflight runs before the workspace is entered, reads /dev/null (never the go-ahead
        # or the protocol), and keeps its variables and options to itself.
        "preflight": sh(
            remote_script(
                str(hostile),
                [py, "-c", PRINT_ENV_AND_STDIN.replace("{'env'", "{'cwd': os.getcwd(), 'env'")],
                token="tokpf",
                ready_marker="m-pf",
                preflight=PREFLIGHT,
            ),
            b"go\n" + STDIN_REST,
        ),
        "preflight_exits": sh(
            remote_script(
                str(root), [py, "-c", "print('agent')"], ready_marker="m-pfx", preflight="echo early; exit 3"
            ),
            b"go\n",
        ),
        "ready_wrong_go": sh(
            remote_script(str(root), f"touch {shlex.quote(str(root / 'ran-wronggo'))}", ready_marker="m-w"),
            b"initialize\n",
        ),
        "no_tool": Case(
            ("env", f"PATH={root / 'empty-bin'}", "/bin/sh", "-c", BOOTSTRAP),
            stdin_prefix(
                remote_script(
                    str(root), f"touch {shlex.quote(str(root / 'ran-notool'))}", tool_path=str(root / "empty-bin")
                )
            ),
        ),
        # The script read in one go (head -c), as a session with a ready marker reads it.
        "whole_env_cat": sh(
            remote_script(str(root), "cat", ENV_VALUES),
            STDIN_REST,
            prefix=stdin_prefix(remote_script(str(root), "cat", ENV_VALUES), whole_input=True),
        ),
        "whole_cut_before_end": sh(env_script, prefix=whole_prefix[: whole_prefix.rindex(END_MARK.encode())]),
        "whole_loader_eaten": sh(env_script, prefix=whole_prefix[whole_prefix.index(b"\n") + 1 :]),
        "whole_without_head": Case(
            ("env", f"PATH={root / 'empty-bin'}", "/bin/sh", "-c", BOOTSTRAP),
            stdin_prefix(remote_script(str(root), 'printf "%s" "$PATH"', token="tokpath"), whole_input=True),
        ),
        "trimmed_path": Case(
            ("env", f"PATH={root / 'empty-bin'}", "/bin/sh", "-c", BOOTSTRAP),
            stdin_prefix(remote_script(str(root), 'printf "%s" "$PATH"', token="tokpath")),
        ),
    }
    (root / "empty-bin").mkdir()
    for shell in LOGIN_SHELLS:
        if shutil.which(shell.split()[0]):
            # The login shell runs the fixed line; hostile data travels on stdin.
            cases[f"login_{shell}"] = Case(
                (*shell.split(), "-c", login_line()),
                stdin_prefix(remote_script(str(hostile), hostile_command, token=f"toklogin{shell.split()[-1]}")),
            )
    return cases


PREFLIGHT = """\
echo "preflight in $PWD"
if IFS= read -r line; then echo "it read: $line"; else echo 'its stdin was empty'; fi
_ra_ws=/nowhere; _ra_list=; PF_VAR=leaked; export PF_VAR; set -f; IFS=x
echo 'preflight done'"""


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


@pytest.mark.parametrize("shell", LOGIN_SHELLS)
def test_hostile_data_survives_every_login_shell(runs: Runs, shell: str) -> None:
    if f"login_{shell}" not in runs.results:
        pytest.skip(f"{shell} is not installed")
    assert runs[f"login_{shell}"] == runs["hostile"]


@pytest.mark.parametrize(("case", "ran_marker"), [("missing_string", "ran-string"), ("missing_list", "ran-list")])
def test_missing_workspace_exits_97_and_never_runs_the_command(runs: Runs, case: str, ran_marker: str) -> None:
    ran = runs[case]
    missing = runs.root / "missing -dir 'q' \"dq\" $x; y"
    assert ran.code == 97
    assert ran.out == b""
    assert ran.err == f"{WORKSPACE_MARK} missing {missing}\n"
    assert not (runs.root / ran_marker).exists()


def test_workspace_that_is_a_file_exits_97(runs: Runs) -> None:
    ran = runs["file_workspace"]
    assert (ran.code, ran.out) == (97, b"")
    assert ran.err == f"{WORKSPACE_MARK} not_dir {runs.root / 'plain-file'}\n"
    assert not (runs.root / "ran-file").exists()


def test_missing_workspace_message_keeps_backslashes(runs: Runs) -> None:
    ran = runs["backslash_workspace"]
    assert ran.code == 97
    where = runs.root / "no\\cwhere"
    assert ran.err == f"{WORKSPACE_MARK} missing {where}\n"


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
    assert not [name for name in seen["env"] if name.lower().startswith("_ra_") and name != "_RA_SESSION"]


def test_environment_then_cat_passes_stdin_through_byte_for_byte(runs: Runs) -> None:
    assert runs["env_cat"] == Ran(0, STDIN_REST, "")


def test_a_script_read_in_one_go_leaves_the_rest_of_stdin_whole(runs: Runs) -> None:
    assert runs["whole_env_cat"] == runs["env_cat"] == Ran(0, STDIN_REST, "")


def test_without_head_the_script_is_read_line_by_line(runs: Runs) -> None:
    assert runs["whole_without_head"] == runs["trimmed_path"] == Ran(0, str(runs.root / "empty-bin").encode(), "")


@pytest.mark.parametrize(
    "case",
    ["cut_after_loader", "cut_in_data", "cut_before_end", "loader_eaten", "whole_cut_before_end", "whole_loader_eaten"],
)
def test_a_prefix_cut_short_exits_98_with_a_clear_message_and_runs_nothing(runs: Runs, case: str) -> None:
    ran = runs[case]
    assert ran.code == 98
    assert ran.out == b""
    assert ran.err == f"{ENV_MESSAGE}\n"


def test_a_shell_reading_stdin_as_commands_stops_at_the_loader(runs: Runs) -> None:
    ran = runs["another_shell"]
    assert (ran.code, ran.out) == (98, b"")
    assert ran.err == f"{ENV_MESSAGE}{ANOTHER_SHELL}\n"


def test_the_go_ahead_is_read_before_the_agent_and_not_passed_on(runs: Runs) -> None:
    ran = runs["ready_go"]
    assert (ran.code, ran.err) == (0, "")
    marker, rest = ran.out.split(b"\n", 1)
    assert marker == b"m-go"
    assert bytes.fromhex(json.loads(rest)["stdin"]) == STDIN_REST


def test_the_preflight_runs_before_the_workspace_and_reads_nothing_of_the_session(runs: Runs) -> None:
    ran = runs["preflight"]
    assert (ran.code, ran.err) == (0, "")
    pre, rest = ran.out.split(b"m-pf\n", 1)
    assert pre.decode() == f"preflight in {os.getcwd()}\nits stdin was empty\npreflight done\n"
    agent = json.loads(rest)
    assert bytes.fromhex(agent["stdin"]) == STDIN_REST  # the go-ahead taken, the protocol whole
    # Its subshell kept its variables: neither the workspace nor the command changed.
    assert agent["cwd"] == str(runs.root / HOSTILE_DIR) and "PF_VAR" not in agent["env"]


def test_a_preflight_that_exits_ends_only_itself(runs: Runs) -> None:
    assert runs["preflight_exits"] == Ran(0, b"early\nm-pfx\nagent\n", "")


def test_a_preflight_needs_a_marker_and_ascii() -> None:
    with pytest.raises(ValueError, match="preflight needs a ready marker"):
        remote_script("/w", ["a"], preflight="true")
    with pytest.raises(ValueError, match="must be ASCII"):
        remote_script("/w", ["a"], ready_marker="m", preflight="echo \u00e9")


@pytest.mark.parametrize(("case", "ran_marker"), [("ready_no_go", "ran-nogo"), ("ready_wrong_go", "ran-wronggo")])
def test_without_the_go_ahead_nothing_starts(runs: Runs, case: str, ran_marker: str) -> None:
    ran = runs[case]
    assert ran.code == 95
    assert ran.err == "remote-acp: no go-ahead after the ready marker; nothing was started\n"
    assert not (runs.root / ran_marker).exists()


def test_a_missing_supervisor_tool_is_named_before_anything_starts(runs: Runs) -> None:
    ran = runs["no_tool"]
    assert (ran.code, ran.out) == (96, b"")
    assert ran.err == f"{TOOL_MARK} awk\n"
    assert not (runs.root / "ran-notool").exists()


def test_the_supervisor_finds_its_tools_but_the_agent_keeps_the_login_path(runs: Runs) -> None:
    assert runs["trimmed_path"] == Ran(0, str(runs.root / "empty-bin").encode(), "")


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


@pytest.mark.parametrize("shell", [s for s in ("sh", "dash", "bash", "busybox") if shutil.which(s)])
def test_the_watchdogs_newest_sleep_goes_with_it_even_before_its_pid_was_noted(shell: str) -> None:
    # The race: the script ends the watchdog (TERM) right after `sleep 1 &` forked and before the
    # watchdog could note the sleep's pid. Its trap still kills that sleep, and never the agent
    # ($! before the watchdog's first sleep), which the script has reaped by then.
    from remote_acp.targets.ssh.script import WATCH_TRAP

    body = (
        'sleep 60 >/dev/null 2>&1 & _ra_agent=$!; echo "$_ra_agent"\n'
        f"trap {shlex.quote(WATCH_TRAP)} TERM\n"
        "{before}"
        'echo "$!"\n'
        'wait "$_ra_agent"\n'  # where the TERM arrives
        "echo trap-did-not-exit\n"
    )
    for before, newest_dies in (("sleep 60 >/dev/null 2>&1 &\n", True), ("", False)):
        argv = (
            [shell, "sh", "-c", body.format(before=before)]
            if shell == "busybox"
            else [shell, "-c", body.format(before=before)]
        )
        watchdog = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        assert watchdog.stdout is not None
        agent, newest = int(watchdog.stdout.readline()), int(watchdog.stdout.readline())
        watchdog.send_signal(signal.SIGTERM)
        assert watchdog.wait(timeout=30) == 0
        assert watchdog.stdout.read() == ""  # the trap exited
        watchdog.stdout.close()
        try:
            assert alive(agent)  # the stand-in agent is never signalled by the trap
            if newest_dies:  # signalled: it goes as soon as it is scheduled
                deadline = time.monotonic() + 10
                while alive(newest) and time.monotonic() < deadline:
                    time.sleep(0.01)
                assert not alive(newest)
        finally:
            for pid in {agent, newest}:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
