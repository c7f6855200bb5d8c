"""Every failure cause a real sshd or a real process can produce, provoked for real, read alike
through the library, ``remote-acp run --json`` and ``remote-acp check host --json``.

Each cause is provoked once per route, the three routes at once: :func:`open_session` with an
:class:`SshTarget` (or a :class:`LocalTarget`), ``run`` and ``check host`` as real processes. Each
must name the same kind and cause; retryability is the cause's (:data:`hostinv.causes.CAUSES`),
the exit status follows from the kind, the verdict from the cause, and the fix is the one the
library computes, never part of the message. What provokes each: a port nothing listens on, a
server that stalls the key exchange, a name under ``.invalid``, a known_hosts holding another key
or none (policy ``yes``), a key the server does not know, an ssh_config ssh refuses, throwaway users
whose login runs no command (``/bin/false``) or whose ``.bashrc`` reads standard input, a missing
workspace, a missing agent (the remote shell's 127), an agent that exits 3 at start, a host at
capacity (a slot held by a live session), and an agent that answers ``-32000``.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio
import pytest

from hostinv.causes import CAUSES, Cause
from integration.users import agent_pythonpath, throwaway_user
from remote_acp import ErrorKind, LocalTarget, RemoteAcpError, open_session
from remote_acp.targets.ssh.settings import SshSettings
from remote_acp.targets.ssh.target import SshTarget
from tests.support.agent_scripts import SYSTEM_PYTHON, host_agent_argv
from tests.support.agents import fast_options, scripted
from tests.support.causes import StallingServer, free_port, keygen, remote_acp, wrong_key_line

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from integration.sshlab import SshLab
    from remote_acp.targets.launch import LaunchTarget
    from tests.support.causes import CliRun

pytestmark = pytest.mark.anyio

BOUNDS: dict[str, Any] = {"read_timeout_ms": 10_000, "initialize_floor_ms": 30_000, "stop_grace_ms": 1_000}
CONNECTION_VERDICTS = {"unreachable", "auth_failed", "host_key_changed", "host_key_unknown"}


@dataclass(frozen=True)
class Provocation:
    """Where and how a session start is made to fail."""

    destination: str
    config: Path
    agent: list[str] = field(default_factory=lambda: scripted())
    workspace: str = "/tmp"
    policy: Literal["accept-new", "yes"] | None = None
    connect_timeout_s: int = 10

    def target(self) -> SshTarget:
        settings = SshSettings(
            config_file=str(self.config), host_key_policy=self.policy, connect_timeout_s=self.connect_timeout_s
        )
        return SshTarget(self.destination, settings)

    def flags(self) -> list[str]:
        policy = ["--host-key-policy", self.policy] if self.policy else []
        return [
            "--agent",
            shlex.join(self.agent),
            "--workspace",
            self.workspace,
            "--ssh-config",
            str(self.config),
            "--connect-timeout",
            str(self.connect_timeout_s),
            *policy,
        ]


class Lab:
    """The session's sshd lab, plus what each cause needs: ssh_configs, users, a stalling server."""

    def __init__(self, lab: SshLab, root: Path, users: dict[str, str], stalling: StallingServer) -> None:
        self.lab, self.root, self.users, self.stalling = lab, root, users, stalling
        lab1 = lab.host("lab1")
        self.key_name = f"[{lab1.address}]:{lab1.port}"
        changed, empty = root / "known_hosts_changed", root / "known_hosts_empty"
        changed.write_text(wrong_key_line(self.key_name, root) + "\n")
        empty.write_text("")
        self.changed = lab.config_variant(root / "cfg_changed", known_hosts=changed)
        self.unknown = lab.config_variant(root / "cfg_unknown", known_hosts=empty)
        self.stranger = lab.config_variant(root / "cfg_stranger", identity=keygen(root / "stranger"))
        self.invalid = root / "cfg_invalid"
        self.invalid.write_text("Host lab1\n  NoSuchOption yes\n\n" + lab.config.read_text())
        self.inventory = root / "inventory.yaml"
        self.inventory.write_text("hosts: {}\n")
        self.env = {
            "REMOTE_ACP_CACHE_DIR": str(root / "cache"),
            "REMOTE_ACP_STATE_DIR": str(root / "state"),
            "REMOTE_ACP_INVENTORY": str(self.inventory),
        }

    def provoke(self, cause: Cause) -> Provocation:
        config = self.lab.config
        lab1 = self.lab.host("lab1")
        return {
            Cause.CONNECT_REFUSED: Provocation(f"root@{lab1.address}:{free_port(lab1.address)}", config),
            Cause.CONNECT_TIMEOUT: Provocation(f"root@127.0.0.1:{self.stalling.port}", config, connect_timeout_s=1),
            Cause.NAME_UNRESOLVED: Provocation("root@remote-acp-no-such-host.invalid", config),
            Cause.HOST_KEY_CHANGED: Provocation("lab1", self.changed),
            Cause.HOST_KEY_UNKNOWN: Provocation("lab1", self.unknown, policy="yes"),
            Cause.AUTH_FAILED: Provocation("lab1", self.stranger),
            Cause.SSH_CONFIG_INVALID: Provocation("lab1", self.invalid),
            Cause.LOGIN_REFUSED: Provocation(f"{self.users['false']}@lab1", config),
            Cause.LOGIN_READS_STDIN: Provocation(f"{self.users['reads']}@lab1", config),
            Cause.WORKSPACE_INVALID: Provocation("lab1", config, workspace="/nonexistent/remote-acp-ws"),
            Cause.AGENT_NOT_FOUND: Provocation("lab1", config, agent=["remote-acp-no-such-agent", "--acp"]),
            Cause.AGENT_EXITED: Provocation("lab1", config, agent=scripted("--crash-at", "initialize")),
            Cause.CREDENTIAL_REFUSED: Provocation("lab1", config, agent=scripted("--new-error", "-32000")),
        }[cause]


@pytest.fixture(scope="module")
def lab(ssh_lab: SshLab, homes: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    key = ssh_lab.client_key.with_suffix(".pub")
    stalling = StallingServer()
    try:
        with (
            throwaway_user(key, shell="/bin/false", base=homes) as false,
            throwaway_user(key, shell="/bin/bash", base=homes, dotfiles={".bashrc": "read -r line\n"}) as reads,
        ):
            users = {"false": false.name, "reads": reads.name}
            yield Lab(ssh_lab, tmp_path_factory.mktemp("causes"), users, stalling)
    finally:
        stalling.close()


@pytest.fixture(autouse=True)
def private_dirs(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    """The library's generated ssh_configs go to the lab's directory, never the user's cache."""
    for name, value in lab.env.items():
        monkeypatch.setenv(name, value)


async def start_error(workspace: str, command: list[str], target: LaunchTarget) -> RemoteAcpError:
    with pytest.raises(RemoteAcpError) as info, anyio.fail_after(60):
        async with open_session(workspace, fast_options(command, **BOUNDS), target=target):
            pass
    return info.value


@dataclass(frozen=True)
class Case:
    cause: Cause
    kind: ErrorKind
    run_status: int
    verdict: str
    exit_status: int | None = None
    """The ssh's (or agent's) exit status the error's facts carry, where it is fixed."""
    probed: bool = False
    """``check host``'s probe finds it before any agent starts (no session error: no error_kind)."""
    rpc_code: int | None = None
    """The JSON-RPC error code the facts carry."""
    by_ssh: bool = True
    """Read from ssh's end (the facts name the destination), not from the agent's answers."""


# The run's exit status: 5 when a retry can mend it, 3 when the cause says no retry will (a
# scheduler that retries on 5 must not retry these forever).
CASES = [
    Case(Cause.CONNECT_REFUSED, ErrorKind.PORT_EXIT, 5, "unreachable", 255),
    Case(Cause.CONNECT_TIMEOUT, ErrorKind.PORT_EXIT, 5, "unreachable"),
    Case(Cause.NAME_UNRESOLVED, ErrorKind.PORT_EXIT, 5, "unreachable", 255),
    Case(Cause.HOST_KEY_CHANGED, ErrorKind.PORT_EXIT, 3, "host_key_changed", 255),
    Case(Cause.HOST_KEY_UNKNOWN, ErrorKind.PORT_EXIT, 3, "host_key_unknown", 255),
    Case(Cause.AUTH_FAILED, ErrorKind.PORT_EXIT, 3, "auth_failed", 255),
    Case(Cause.SSH_CONFIG_INVALID, ErrorKind.PORT_EXIT, 3, "unreachable", 255),
    Case(Cause.LOGIN_REFUSED, ErrorKind.PORT_EXIT, 3, "probe_failed", 1),
    Case(Cause.LOGIN_READS_STDIN, ErrorKind.PORT_EXIT, 3, "probe_failed", 98),
    Case(Cause.WORKSPACE_INVALID, ErrorKind.INVALID_WORKSPACE_CWD, 3, "workspace_invalid", 97),
    Case(Cause.AGENT_NOT_FOUND, ErrorKind.PORT_EXIT, 3, "agent_not_found", 127, probed=True),
    Case(Cause.AGENT_EXITED, ErrorKind.PORT_EXIT, 3, "agent_failed", 3, by_ssh=False),
    Case(
        Cause.CREDENTIAL_REFUSED,
        ErrorKind.CREDENTIAL_UNVERIFIED,
        4,
        "credential_unverified",
        rpc_code=-32000,
        by_ssh=False,
    ),
]


def fix_prefix(cause: Cause) -> str:
    """The words of the cause's fix before the first fact it names."""
    return CAUSES[cause].fix.split("{", 1)[0]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.cause.value)
async def test_a_cause_over_ssh_reads_alike_in_the_library_run_and_check(lab: Lab, case: Case) -> None:
    p = lab.provoke(case.cause)
    runs: dict[str, CliRun] = {}
    errors: list[RemoteAcpError] = []

    async def library() -> None:
        errors.append(await start_error(p.workspace, p.agent, p.target()))

    async def cli(name: str, args: list[str]) -> None:
        runs[name] = await remote_acp(args, lab.env)

    with anyio.fail_after(90):
        async with anyio.create_task_group() as tg:
            tg.start_soon(library)
            tg.start_soon(cli, "run", ["run", "--json", "--host", p.destination, *p.flags(), "hi"])
            tg.start_soon(cli, "check", ["check", "host", "--json", p.destination, *p.flags()])
    (err,) = errors
    retryable = CAUSES[case.cause].retryable

    # The library: kind, cause, the retry class the table gives, the facts, the fix apart.
    assert (err.kind, err.cause, err.retryable) == (case.kind, case.cause, retryable), repr(err)
    if case.by_ssh:  # (the agent's own failures: see test_an_agent_failure_over_ssh_names_its_destination)
        assert err.facts.destination == p.destination, err.facts
    assert (err.facts.exit_status, err.facts.rpc_code) == (case.exit_status, case.rpc_code), err.facts
    assert err.fix.startswith(fix_prefix(case.cause)), err.fix
    assert not err.fix or err.fix not in str(err)
    if case.cause is Cause.WORKSPACE_INVALID:  # the fix names the workspace the host lacks
        assert err.fix == f"pass a workspace that exists, or create it: mkdir -p -- {p.workspace}"

    # remote-acp run: the same, as data, with the kind's exit status.
    run = runs["run"]
    final = run.last("run_result")
    assert run.status == case.run_status, (final, run.stderr)
    assert final["outcome"] == "start_failed" and final["session_id"] is None
    assert (final["error_kind"], final["cause"], final["retryable"]) == (case.kind.value, case.cause.value, retryable)
    assert final["fix"] == (err.fix or None), final
    assert err.fix not in final["message"]

    # remote-acp check host: the verdict is the cause's, from the one table.
    check = runs["check"]
    (host,) = check.lines
    assert CAUSES[case.cause].verdict == case.verdict
    assert (host["verdict"], host["cause"], host["retryable"], host["ready"]) == (
        case.verdict,
        case.cause.value,
        retryable,
        False,
    ), host
    assert host["error_kind"] == (None if case.probed else case.kind.value), host
    assert check.status == (20 if case.verdict in CONNECTION_VERDICTS else 21), host
    assert host["fix"] and host["fix"].startswith(fix_prefix(case.cause)), host
    if "{ssh_target}" not in CAUSES[case.cause].fix:
        assert host["fix"] == err.fix, host  # nothing in it depends on how the host was named


LOCAL_WORKSPACE = "/nonexistent/remote-acp-ws"


@pytest.mark.parametrize(
    ("cause", "kind", "status", "command", "workspace"),
    [
        (Cause.AGENT_NOT_FOUND, ErrorKind.AGENT_NOT_FOUND, 3, ["remote-acp-no-such-agent", "--acp"], "/tmp"),
        (Cause.WORKSPACE_INVALID, ErrorKind.INVALID_WORKSPACE_CWD, 3, scripted(), LOCAL_WORKSPACE),
        (Cause.AGENT_EXITED, ErrorKind.PORT_EXIT, 3, scripted("--crash-at", "initialize"), "/tmp"),
        (Cause.CREDENTIAL_REFUSED, ErrorKind.CREDENTIAL_UNVERIFIED, 4, scripted("--new-error", "-32000"), "/tmp"),
    ],
    ids=lambda v: v.value if isinstance(v, Cause) else None,
)
async def test_a_cause_of_a_local_start_reads_alike_in_the_library_and_run(
    lab: Lab, cause: Cause, kind: ErrorKind, status: int, command: list[str], workspace: str
) -> None:
    # Locally a missing program is the seeds' agent_not_found itself (no shell between).
    runs: list[CliRun] = []

    async def cli() -> None:
        args = ["run", "--json", "--agent", shlex.join(command), "--workspace", workspace, "hi"]
        runs.append(await remote_acp(args, lab.env))

    async with anyio.create_task_group() as tg:
        tg.start_soon(cli)
        err = await start_error(workspace, command, LocalTarget())
    assert (err.kind, err.cause, err.retryable) == (kind, cause, CAUSES[cause].retryable), repr(err)
    assert err.fix.startswith(fix_prefix(cause)) and err.fix not in str(err)
    if cause is Cause.WORKSPACE_INVALID:
        assert err.fix == f"pass a workspace that exists, or create it: mkdir -p -- {LOCAL_WORKSPACE}"
    (run,) = runs
    final = run.last("run_result")
    assert run.status == status, (final, run.stderr)
    assert (final["error_kind"], final["cause"], final["retryable"], final["fix"]) == (
        kind.value,
        cause.value,
        err.retryable,
        err.fix,
    ), final


async def test_a_credential_refused_at_the_first_prompt_is_not_retryable(lab: Lab) -> None:
    # An agent that lists no auth method and refuses only at session/prompt (Claude's adapter does).
    p = lab.provoke(Cause.CONNECT_REFUSED)  # for its flags only; the host is lab1
    flags = [*Provocation("lab1", p.config).flags()]
    runs: list[CliRun] = []

    async def cli() -> None:
        runs.append(await remote_acp(["run", "--json", "--host", "lab1", *flags, "@error=-32000"], lab.env))

    async with anyio.create_task_group() as tg:
        tg.start_soon(cli)
        with anyio.fail_after(60):
            target = Provocation("lab1", p.config).target()
            async with open_session("/tmp", fast_options(scripted(), **BOUNDS), target=target) as session:
                async with session.turn("@error=-32000") as turn:
                    async for _ in turn:
                        pass
    assert turn.result is not None and turn.result.error is not None
    error = turn.result.error
    assert (error.kind, error.cause, error.retryable) == (
        ErrorKind.CREDENTIAL_UNVERIFIED,
        Cause.CREDENTIAL_REFUSED,
        False,
    )
    assert error.facts.rpc_code == -32000 and error.fix == CAUSES[Cause.CREDENTIAL_REFUSED].fix
    (run,) = runs
    final = run.last("run_result")
    assert run.status == 4, (final, run.stderr)
    assert final["outcome"] == "turn_failed" and final["session_id"] is not None
    assert (final["error_kind"], final["cause"], final["retryable"]) == (
        "credential_unverified",
        "credential_refused",
        False,
    )


async def test_a_host_at_capacity_is_retryable_everywhere(lab: Lab, ssh_lab: SshLab, homes: Path) -> None:
    # A throwaway user of its own: a host's slots are its account's, so no other test's root
    # session can hold this one, nor this test hold theirs.
    assert SYSTEM_PYTHON is not None
    agent = host_agent_argv(python=SYSTEM_PYTHON, pythonpath=agent_pythonpath())
    with throwaway_user(ssh_lab.client_key.with_suffix(".pub"), shell="/bin/bash", base=homes) as user:
        destination, workspace = user.destination("lab1"), str(user.home)
        inventory = lab.root / "capacity.yaml"
        inventory.write_text(
            f"hosts:\n  busy: {{address: lab1, user: {user.name}, capacity: 1}}\n"
            "  spare: {address: lab2, user: root}\n"
        )
        settings = SshSettings(config_file=str(ssh_lab.config), capacity=1)
        flags = ["--inventory", str(inventory), "--ssh-config", str(ssh_lab.config), "--agent", shlex.join(agent)]
        runs: dict[str, CliRun] = {}

        async def cli(name: str, args: list[str]) -> None:
            runs[name] = await remote_acp([*args, *flags], lab.env)

        with anyio.fail_after(60):
            async with open_session(workspace, fast_options(agent, **BOUNDS), target=SshTarget(destination, settings)):
                async with anyio.create_task_group() as tg:  # the one slot is held meanwhile
                    tg.start_soon(cli, "run", ["run", "--json", "--host", "busy", "--workspace", workspace, "hi"])
                    tg.start_soon(cli, "check", ["check", "host", "--json", "busy", "--workspace", workspace])
                    # a placed run keeps its cause: a missing workspace is exit 3, as unplaced
                    placed_args = ["run", "--json", "--host", "spare", "--workspace", LOCAL_WORKSPACE, "hi"]
                    tg.start_soon(cli, "placed", placed_args)
                    err = await start_error(workspace, agent, SshTarget(destination, settings))
            # The session ended: its slot went with it.
            async with open_session(workspace, fast_options(agent, **BOUNDS), target=SshTarget(destination, settings)):
                pass
    assert (err.kind, err.cause, err.retryable) == (ErrorKind.PORT_EXIT, Cause.AT_CAPACITY, True), repr(err)
    assert err.facts.destination == destination and err.fix == CAUSES[Cause.AT_CAPACITY].fix
    run = runs["run"]
    final = run.last("run_result")
    assert run.status == 5, (final, run.stderr)
    assert (final["error_kind"], final["cause"], final["retryable"]) == ("port_exit", "at_capacity", True), final
    assert final["fix"] == CAUSES[Cause.AT_CAPACITY].fix
    # no host could take it: every host tried, with its cause
    tried = [(h["host"], h["destination"], h["cause"], h["retryable"]) for h in final["placement"]["hosts"]]
    assert tried == [("busy", destination, "at_capacity", True)], final
    (host,) = runs["check"].lines
    assert runs["check"].status == 21, host
    assert (host["verdict"], host["cause"], host["retryable"]) == ("at_capacity", "at_capacity", True), host
    assert host["slots_held"] == 1 and host["capacity"] == 1, host
    placed = runs["placed"]
    final = placed.last("run_result")
    assert placed.status == 3, (final, placed.stderr)
    assert (final["error_kind"], final["cause"], final["retryable"]) == (
        "invalid_workspace_cwd",
        "workspace_invalid",
        False,
    )


@pytest.mark.parametrize("cause", [Cause.AGENT_EXITED, Cause.CREDENTIAL_REFUSED], ids=lambda c: c.value)
async def test_an_agent_failure_over_ssh_names_its_destination(lab: Lab, cause: Cause) -> None:
    p = lab.provoke(cause)
    err = await start_error(p.workspace, p.agent, p.target())
    assert err.cause is cause
    assert err.facts.destination == p.destination, err.facts
