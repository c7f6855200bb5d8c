"""The session script with a reattach window, run for real under dash, bash and BusyBox ash as
the host runs it (the loader on stdin, then ``go`` and the start request in one write): the
agent starts in the workspace with the carried environment and the login's PATH and umask, under
the relay, survives its link, and is reached again by the reconnect's login; its slot, when it
takes one, is held while it is detached and counted with ordinary sessions' slots."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from remote_acp.targets.ssh.loader import BOOTSTRAP, stdin_prefix
from remote_acp.targets.ssh.script import (
    AT_CAPACITY_MARK,
    EXIT_AT_CAPACITY,
    EXIT_NO_TOOL,
    SLOT_TOOLS,
    SUPERVISOR_TOOLS,
    TOOL_MARK,
    WINDOW_TOOLS,
    remote_script,
)
from tests.support.processes import read_line, wait_for
from tests.support.relay_host import AGENT, MARKER, SHELLS, Controller, Refused, shell_env, slot_free, wait_gone

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path

pytestmark = pytest.mark.process

CARRIED = {"FOO": "a b 'c' $HOME `id`", "MULTI": "x\ny"}


@pytest.fixture(params=SHELLS)
def shell(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    return shell_env(request.param, tmp_path)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "work space"
    (path / "sub").mkdir(parents=True)
    return path


@pytest.fixture
def controllers() -> Iterator[list[Controller]]:
    made: list[Controller] = []
    yield made
    for c in made:
        c.close()


def controller(made: list[Controller], shell: tuple[list[str], dict[str, str]], tmp_path: Path) -> Controller:
    c = Controller(*shell, tmp_path / f"slots-{os.getuid()}")
    made.append(c)
    return c


def window_script(
    c: Controller, workspace: Path, command: str | Sequence[str], *, capacity: int | None = None, window_s: int = 5
) -> str:
    return remote_script(
        str(workspace),
        command,
        CARRIED,
        kill_grace_s=1,
        ready_marker=MARKER,
        capacity=capacity,
        slot_prefix=c.slot_prefix,
        reattach_window_s=window_s,
    )


def agent_info(c: Controller) -> dict[str, object]:
    wait_for(lambda: b"\n" in c.out, "the agent's first line")
    info: dict[str, object] = json.loads(bytes(c.out).split(b"\n", 1)[0])
    return info


def test_the_agent_starts_in_the_workspace_with_the_carried_environment_and_outlives_its_link(
    shell: tuple[list[str], dict[str, str]], tmp_path: Path, workspace: Path, controllers: list[Controller]
) -> None:
    c = controller(controllers, shell, tmp_path)
    c.start_session(window_script(c, workspace, [sys.executable, "-c", AGENT, "echo", "-"]))
    info = agent_info(c)
    assert info["cwd"] == str(workspace)
    env = info["env"]
    assert isinstance(env, dict)
    assert {name: env.get(name) for name in CARRIED} == CARRIED
    assert env["PATH"] == c.env["PATH"]  # the login's, without the steps' fallback
    assert env["_RA_SESSION"] == f"{c.sid}."
    umask = os.umask(0)
    os.umask(umask)
    assert info["umask"] == umask  # not the steps' 077
    assert not [name for name in env if name.lower().startswith("_ra_") and name != "_RA_SESSION"]
    assert not list(c.base.glob("slot-*")), "a session without a capacity took a slot"
    c.send(b"one\n")
    wait_for(lambda: c.out.endswith(b"got one\n"), "the first echo")
    c.cut("kill")
    c.send(b"two\n")  # while detached: resent on the reattach
    c.login()
    c.send(b"exit 7\n")
    assert c.finish(close_input=False) == 7
    assert c.end == f"RA-END out={len(c.out)} rc=7".encode()
    assert bytes(c.out).split(b"\n", 1)[1] == b"got one\ngot two\n"
    wait_gone(c, within=5)


def test_a_string_command_is_a_fragment_for_bin_sh_in_the_workspace(
    shell: tuple[list[str], dict[str, str]], tmp_path: Path, workspace: Path, controllers: list[Controller]
) -> None:
    c = controller(controllers, shell, tmp_path)
    c.env = {**c.env, "RA_PY": sys.executable, "RA_CODE": AGENT}
    fragment = 'FOO="from the fragment"; export FOO; cd sub && exec "$RA_PY" -c "$RA_CODE" echo - "$0"'
    c.start_session(window_script(c, workspace, fragment))
    info = agent_info(c)
    assert info["cwd"] == str(workspace / "sub")
    assert info["argv"] == ["-", "/bin/sh"]
    env = info["env"]
    assert isinstance(env, dict) and env["FOO"] == "from the fragment" and env["MULTI"] == "x\ny"
    c.send(b"exit 5\n")
    assert c.finish(close_input=False) == 5
    wait_gone(c, within=5)


def test_a_tool_the_window_needs_is_named_before_anything_starts(tmp_path: Path, workspace: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in (*SUPERVISOR_TOOLS, *SLOT_TOOLS, *WINDOW_TOOLS):
        found = shutil.which(tool)
        if tool != "mkfifo" and found:
            (bin_dir / tool).symlink_to(found)
    ran = workspace / "ran"
    script = remote_script(
        str(workspace),
        f"touch '{ran}'",
        ready_marker=MARKER,
        tool_path=str(bin_dir),
        slot_prefix=str(tmp_path / "slots-"),
        reattach_window_s=5,
    )
    done = subprocess.run(
        ["/bin/sh", "-c", BOOTSTRAP],
        input=stdin_prefix(script, whole_input=True) + b"go\nabc secret\n",
        capture_output=True,
        env={**os.environ, "PATH": str(bin_dir)},
        timeout=15,
    )
    assert (done.returncode, done.stdout) == (EXIT_NO_TOOL, b"")
    assert done.stderr.decode() == f"{TOOL_MARK} mkfifo\n"
    assert not ran.exists()


def ordinary_session(prefix: str) -> subprocess.Popen[bytes]:
    """A session script without a window, taking one of one slot at ``prefix``."""
    script = remote_script("/", ["sleep", "60"], capacity=1, slot_prefix=prefix, ready_marker=MARKER)
    proc = subprocess.Popen(
        ["/bin/sh", "-c", BOOTSTRAP],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdin is not None
    proc.stdin.write(stdin_prefix(script))
    proc.stdin.flush()
    return proc


def test_a_window_with_a_capacity_holds_its_slot_while_detached_and_ordinary_sessions_see_it(
    shell: tuple[list[str], dict[str, str]], tmp_path: Path, workspace: Path, controllers: list[Controller]
) -> None:
    c = controller(controllers, shell, tmp_path)
    c.start_session(window_script(c, workspace, [sys.executable, "-c", AGENT, "echo", "-"], capacity=1, window_s=20))
    agent_info(c)
    assert not slot_free(c.base)
    c.cut("kill")
    assert not slot_free(c.base), "the slot went with the link"
    held = ordinary_session(c.slot_prefix)
    _, err = held.communicate(timeout=15)
    assert (held.returncode, err.decode()) == (EXIT_AT_CAPACITY, f"{AT_CAPACITY_MARK} 1\n")
    c.login()
    c.end_session()
    c.finish()
    wait_gone(c, within=5)
    free = ordinary_session(c.slot_prefix)
    try:
        assert free.stdout is not None
        assert read_line(free.stdout, within=15, what="the ready marker") == MARKER.encode()
    finally:
        os.killpg(free.pid, 9)
        free.communicate(timeout=15)


def test_a_full_host_refuses_a_window_before_its_marker(
    shell: tuple[list[str], dict[str, str]], tmp_path: Path, workspace: Path, controllers: list[Controller]
) -> None:
    c = controller(controllers, shell, tmp_path)
    held = ordinary_session(str(tmp_path / "slots-"))
    try:
        assert held.stdout is not None
        assert read_line(held.stdout, within=15, what="the ready marker") == MARKER.encode()
        with pytest.raises(Refused) as refused:
            c.start_session(window_script(c, workspace, ["true"], capacity=1))
        assert refused.value.status == EXIT_AT_CAPACITY
        assert refused.value.err.decode() == f"{AT_CAPACITY_MARK} 1\n"
        assert not list(c.base.glob("s-*"))
    finally:
        os.killpg(held.pid, 9)
        held.communicate(timeout=15)


def test_a_window_needs_a_marker_and_a_whole_number_of_seconds() -> None:
    with pytest.raises(ValueError, match="ready marker"):
        remote_script("/w", ["a"], reattach_window_s=5)
    for bad in (0, True, 1.5):
        with pytest.raises(ValueError, match="reattach_window_s"):
            remote_script("/w", ["a"], ready_marker=MARKER, reattach_window_s=bad)  # type: ignore[arg-type]
