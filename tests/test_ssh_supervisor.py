"""The remote supervisor, run locally: what it signals, and when."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import pytest

from remote_acp.targets.ssh.script import remote_script
from tests.support.orphans import MARKER_NAME, find_marked, kill_marked
from tests.support.processes import alive, all_gone, children_of, read_line, wait_for, wait_for_file
from tests.support.ssh_build import RUN_TIMEOUT_S

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping
    from pathlib import Path

# -- the supervisor, run locally: what it signals, and when -------------------------------------

# The agent: records its PID; starts short-lived children (like tool calls) that exit long before
# any kill; then long-lived ones: a `setsid` child (left the group), and one with a cleared
# environment (no session token, found only through the tree). On SIGTERM it survives and starts
# one more token-less child, which only a kill set computed at SIGKILL time can know about.
# With "exit" it exits 3 instead, leaving its setsid child behind.
AGENT_SH = r"""
d=$1
echo $$ > "$d/agent"
trap 'env -i "REMOTE_ACP_TEST_MARK=$REMOTE_ACP_TEST_MARK" sleep 600 & echo $! > "$d/late"' TERM
i=0
while [ $i -lt 6 ]; do sleep 0.1 & echo $! >> "$d/short"; wait $!; i=$((i + 1)); done
setsid sleep 600 & echo $! > "$d/setsid"
if [ "$2" = exit ]; then echo ready > "$d/ready"; exit 3; fi
env -i "REMOTE_ACP_TEST_MARK=$REMOTE_ACP_TEST_MARK" sleep 600 & echo $! > "$d/envless"
echo ready > "$d/ready"
while :; do sleep 0.2; done
"""
# The agent becomes (same PID) a program whose name reads like fields of /proc/PID/stat.
ODD_AGENT_SH = 'echo $$ > "$1/agent"; echo ready > "$1/ready"; exec "$0" 600'
# Logs every signal the supervisor sends (a function named kill comes before the builtin), with
# W for the watchdog and the agent's status for the shell's cleanup after `wait` reaped it.
KILL_LOGGER = """kill() {
  case "$1" in -TERM|-KILL) echo "${_ra_rc-W} $*" >> __LOG__ ;; esac
  command kill "$@"
}
"""
PROC_DETECTION = 'if [ -r "/proc/$$/stat" ]; then _ra_proc=1; else _ra_proc=; fi'
LONG_LIVED = ("agent", "setsid", "envless", "late")


@dataclass(frozen=True, slots=True)
class Supervised:
    pids: Mapping[str, list[int]]
    kills: list[tuple[str, str, list[int]]]
    """(who, signal, pids): who is W (the watchdog) or the agent's exit status (the shell)."""
    survivors: list[str]
    code: int | None
    seconds: float
    """From the connection loss (or the start) until every long-lived process was gone."""


def _supervise(
    root: Path,
    name: str,
    env: Mapping[str, str],
    *,
    lose_connection: bool,
    agent: str | list[str] | None = None,
    proc: bool = True,
    path_first: Path | None = None,
    shell: str = "sh",
) -> Supervised:
    """Run the supervisor under a stand-in for the per-connection sshd; with ``lose_connection``,
    SIGKILL the stand-in once the agent is ready, as when the connection goes."""
    d = root / name
    d.mkdir()
    log = d / "kills"
    # A token of its own: a supervisor's cleanup kills whatever carries its token, and the same
    # scenario may run at once in another test process.
    token = f"tok{name.replace('_', '')}{uuid.uuid4().hex}"
    script = remote_script(str(d), agent or ["sh", "-c", AGENT_SH, "agent", str(d)], kill_grace_s=2, token=token)
    if not proc:
        assert script.count(PROC_DETECTION) == 1
        script = script.replace(PROC_DETECTION, "_ra_proc=")
    script = KILL_LOGGER.replace("__LOG__", shlex.quote(str(log))) + script
    env = dict(env)
    if path_first is not None:
        env["PATH"] = f"{path_first}:{env['PATH']}"
    standin = subprocess.Popen(
        ["sh", "-c", f'{shell} -c "$0" & echo $!; wait "$!"; echo "$?"', script],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, start_new_session=True,
    )  # fmt: skip
    assert standin.stdout is not None
    code: int | None = None
    try:
        script_shell = int(read_line(standin.stdout, within=RUN_TIMEOUT_S, what="the script's pid"))
        wait_for_file(d / "ready", within=RUN_TIMEOUT_S)
        if lose_connection:
            # The connection goes once the watchdog runs beside the agent: the shell's second child.
            wait_for(
                lambda: len(children_of(script_shell)) >= 2, "the supervisor's watchdog to start", within=RUN_TIMEOUT_S
            )
            standin.kill()
            standin.wait()
        started = time.monotonic()
        if not lose_connection:
            code = int(read_line(standin.stdout, within=RUN_TIMEOUT_S, what="the script's exit status"))
            standin.wait()
        all_gone([script_shell], within=RUN_TIMEOUT_S)
        pids = {
            p.name: [int(w) for w in p.read_text().split()] for p in d.iterdir() if p.name in (*LONG_LIVED, "short")
        }
        all_gone([pid for what in LONG_LIVED for pid in pids.get(what, [])], within=RUN_TIMEOUT_S)
        seconds = time.monotonic() - started
        survivors = [f"{what} {pid}" for what in LONG_LIVED for pid in pids.get(what, []) if alive(pid)]
    finally:
        if standin.poll() is None:
            os.killpg(standin.pid, signal.SIGKILL)
            standin.wait()
        standin.stdout.close()
    kills = []
    for line in log.read_text().splitlines() if log.exists() else []:
        who, sig, *words = line.split()
        kills.append((who, sig, [int(w) for w in words]))
    return Supervised(pids, kills, survivors, code, seconds)


@pytest.fixture(scope="module")
def supervised(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mapping[str, Supervised]]:
    """Every supervisor scenario at once (each takes a few seconds of polling and grace)."""
    root = tmp_path_factory.mktemp("supervised")
    marker = f"ssh-supervise-{uuid.uuid4().hex}"
    env = {**os.environ, MARKER_NAME: marker}
    no_ps = root / "no-ps"  # a ps that cannot report anything, as BusyBox's cannot do `-o ppid= -p`
    no_ps.mkdir()
    (no_ps / "ps").write_text("#!/bin/sh\necho 'ps: invalid option' >&2\nexit 1\n")
    (no_ps / "ps").chmod(0o755)
    oddly = root / "odd-name"  # a program whose name breaks naive parsing of /proc/PID/stat
    oddly.mkdir()
    (oddly / "sl) S 1 2 (p").symlink_to(shutil.which("sleep") or "/bin/sleep")
    run = partial(_supervise, root, env=env)
    scenarios: dict[str, Callable[[], Supervised]] = {
        "lost": partial(run, "lost", lose_connection=True),
        "lost_without_ps": partial(run, "lost_without_ps", lose_connection=True, path_first=no_ps),
        "lost_without_proc": partial(run, "lost_without_proc", lose_connection=True, proc=False),
        "lost_odd_name": partial(
            run,
            "lost_odd_name",
            lose_connection=True,
            agent=["sh", "-c", ODD_AGENT_SH, str(oddly / "sl) S 1 2 (p"), str(root / "lost_odd_name")],
        ),
        "exits": partial(
            run, "exits", lose_connection=False, agent=["sh", "-c", AGENT_SH, "agent", str(root / "exits"), "exit"]
        ),
    }
    if shutil.which("bash"):  # /bin/sh on some hosts: it keeps a subshell around a fragment's last command
        scenarios["lost_bash"] = partial(run, "lost_bash", lose_connection=True, shell="bash --posix")
        scenarios["lost_bash_fragment"] = partial(
            run,
            "lost_bash_fragment",
            lose_connection=True,
            shell="bash --posix",
            agent=shlex.join(["sh", "-c", AGENT_SH, "agent", str(root / "lost_bash_fragment")]),
        )
    try:
        with ThreadPoolExecutor(max_workers=len(scenarios)) as pool:
            futures = {name: pool.submit(scenario) for name, scenario in scenarios.items()}
            results = {name: future.result() for name, future in futures.items()}
    finally:
        leftovers = kill_marked(marker)
    assert not leftovers, f"supervised processes outlived their run: {leftovers}"
    yield results


@pytest.mark.parametrize("case", ["lost", "lost_without_ps", "lost_without_proc", "lost_bash"])
def test_lost_connection_kills_the_tree_with_signals_computed_when_sent(
    supervised: Mapping[str, Supervised], case: str
) -> None:
    if case not in supervised:
        pytest.skip("bash is not installed")
    ran = supervised[case]
    assert not ran.survivors
    assert ran.seconds < 8  # a second of polling, the 2 s grace, slack for a busy machine
    (agent,), (setsid,), (envless,), (late,) = (ran.pids[what] for what in LONG_LIVED)
    assert len(ran.pids["short"]) == 6
    watchdog = [k for k in ran.kills if k[0] == "W"]
    assert len(watchdog) == 2, ran
    term, kill = watchdog
    assert (term[1], kill[1]) == ("-TERM", "-KILL")
    # The agent last: its death ends the watchdog, so everything else has its signal by then.
    assert term[2][-1] == kill[2][-1] == agent
    assert len(set(term[2])) == len(term[2]) and len(set(kill[2])) == len(kill[2])
    assert {agent, setsid, envless} <= set(term[2])
    assert late not in term[2]  # it did not exist yet
    assert {agent, late} <= set(kill[2])  # the agent survived SIGTERM, and started `late` then
    assert setsid not in kill[2] and envless not in kill[2]  # gone after SIGTERM: not signalled again
    for who, _, pids in ran.kills:
        assert not set(pids) & set(ran.pids["short"]), "signalled children that had exited long before"
        if who != "W":
            assert agent not in pids, "signalled the agent's PID after wait reaped it"


def test_lost_connection_under_bash_with_a_subshell_around_the_agent(supervised: Mapping[str, Supervised]) -> None:
    # bash keeps a subshell around the fragment; it dies at SIGTERM, the shell reaps it and stops
    # the watchdog. The shell's own cleanup then finds the agent by its token, and the child it
    # started without the token (after SIGTERM) as its descendant.
    if "lost_bash_fragment" not in supervised:
        pytest.skip("bash is not installed")
    ran = supervised["lost_bash_fragment"]
    assert not ran.survivors
    assert ran.seconds < 10
    (agent,), (late,) = ran.pids["agent"], ran.pids["late"]
    (_, _, first), *rest = ran.kills
    wrapper = first[-1]
    assert wrapper != agent and agent in first
    assert rest and all(who == "143" for who, _, _ in rest)
    assert rest[-1][1] == "-KILL" and {agent, late} <= set(rest[-1][2])
    for _, _, pids in rest:
        assert wrapper not in pids  # reaped by then
    for _, _, pids in ran.kills:
        assert not set(pids) & set(ran.pids["short"])


def test_lost_connection_is_noticed_without_ps_through_proc(supervised: Mapping[str, Supervised]) -> None:
    ran = supervised["lost_without_ps"]
    assert [k[1] for k in ran.kills if k[0] == "W"] == ["-TERM", "-KILL"]


def test_lost_connection_with_an_agent_whose_name_looks_like_stat_fields(supervised: Mapping[str, Supervised]) -> None:
    ran = supervised["lost_odd_name"]
    assert not ran.survivors
    ((who, sig, pids),) = ran.kills  # one SIGTERM from the watchdog ends it
    assert (who, sig, len(pids)) == ("W", "-TERM", 1)


def test_agent_exit_kills_what_it_left_behind_but_never_the_reaped_agent(supervised: Mapping[str, Supervised]) -> None:
    ran = supervised["exits"]
    assert ran.code == 3
    assert not ran.survivors
    (agent,), (setsid,) = ran.pids["agent"], ran.pids["setsid"]
    assert ran.kills == [("3", "-TERM", [setsid])]  # by its token; not the agent, not the short-lived ones
    assert agent not in ran.kills[0][2]


def test_the_watchdog_leaves_no_sleep_behind_when_the_agent_ends(tmp_path: Path) -> None:
    # The watchdog naps in `sleep 1`; stopped when the agent ends, it must take its nap with it
    # (otherwise a `sleep` outlives the session by up to a second, an orphan on the host).
    mark = f"ra-watch-{uuid.uuid4().hex}"
    script = remote_script(str(tmp_path), ["sh", "-c", "sleep 0.3"], token=f"tokwatch{uuid.uuid4().hex}")
    env = {**os.environ, MARKER_NAME: mark}
    done = subprocess.run(["sh", "-c", script], env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr
    # The kill is sent before the script exits; the signal lands a moment later.
    wait_for(lambda: not find_marked(mark), "the supervisor's processes to end with its script", within=5)


def _starttime(stat: bytes) -> int:
    return int(stat[stat.rindex(b")") + 2 :].split()[19])


@pytest.mark.skipif(not os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children"), reason="no children lists")
def test_the_sweeps_first_pass_finds_a_descendant_that_left_the_tree_and_skips_older_processes(tmp_path: Path) -> None:
    # The teardown reads environments only where the session's token can be (ssh_script._SINCE):
    # the subtrees of its ancestors' children started since its shell. A process that called
    # setsid and lost its parent is re-parented to one of those ancestors (this test process is a
    # subreaper, else init), so it is listed; a process that started before the shell is not.
    from remote_acp.targets.ssh.script import _SINCE

    older = subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL)
    script = (
        'cat "/proc/$$/stat" >"$1/shell"\n'
        "sh -c 'setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $!' >\"$1/escaped\"\n"
        'awk -v shell="$$" -v skip= "$2"\n'
    )
    try:
        with open(f"/proc/{older.pid}/stat", "rb") as f:
            older_stat = f.read()
        done = subprocess.run(
            ["sh", "-c", script, "sweep", str(tmp_path), _SINCE],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
        )  # fmt: skip
    finally:
        if (tmp_path / "escaped").exists():
            os.kill(int((tmp_path / "escaped").read_text()), signal.SIGKILL)
        older.kill()
        older.wait()
    assert done.returncode == 0, done.stderr
    listed = done.stdout.split()
    assert "ALL" not in listed
    assert (tmp_path / "escaped").read_text().strip() in listed
    shell_stat = (tmp_path / "shell").read_bytes()
    shell = shell_stat.split()[0].decode()
    assert shell not in listed and str(os.getpid()) not in listed  # ancestors are not candidates
    if _starttime(older_stat) < _starttime(shell_stat):  # in clock ticks: the same tick counts as since
        assert str(older.pid) not in listed
