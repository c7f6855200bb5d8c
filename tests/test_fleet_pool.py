"""The host pool without a host that answers: its ranking and failure as data, and its view of
hosts that refuse every connection (a loopback port where nothing listens), on asyncio and trio.

The probes are real (``ssh -G`` with a config of the test's own, then asyncssh's connect to a
closed loopback port); what a ready host does is proven against real sshd hosts in
``integration/test_fleet_pool_scheduler.py``.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import anyio
import pytest

from hostinv import Host
from hostinv.probes import HostProbe, ProbeReport, ProbeSettings, Verdict
from remote_acp.errors import Cause, ErrorKind, PlacementAttempt, RemoteAcpError
from remote_acp.fleet.pool import HostPool, placement_error, rank_hosts
from remote_acp.fleet.ranking import free_slots, unplaced_error
from remote_acp.options import SessionOptions

if TYPE_CHECKING:
    from pathlib import Path


def probe(
    name: str,
    verdict: Verdict = Verdict.READY,
    *,
    held: int | None = 0,
    capacity: int = 2,
    cause: Cause | None = None,
    load: float = 0.5,
) -> HostProbe:
    report = ProbeReport(cores=4, load=(load, 0.0, 0.0), slots_held=held)
    return HostProbe(Host(name=name, capacity=capacity), verdict, str(verdict), None, report, 0.1, cause)


def test_a_host_found_full_ranks_last_and_comes_back_when_its_sessions_end() -> None:
    full = probe("full", Verdict.AT_CAPACITY, held=2, cause=Cause.AT_CAPACITY, load=0.0)
    ready = probe("ready", held=1, load=0.9)
    assert [h.name for h in rank_hosts([full, ready])] == ["ready", "full"]
    assert free_slots(full.host, full, 0) == 0
    # One of the sessions it counted ended since (opened -1): it has a slot, and the least load.
    assert [h.name for h in rank_hosts([full, ready], {"full": -1})] == ["full", "ready"]
    assert free_slots(ready.host, ready, 1) == 0


def test_a_host_claiming_more_cores_than_any_machine_has_is_not_ranked_by_its_load() -> None:
    honest = probe("honest", load=0.4)
    boastful = HostProbe(
        Host(name="boastful", capacity=2),
        Verdict.READY,
        "ready",
        None,
        ProbeReport(cores=10**20, load=(0.0, 0.0, 0.0), slots_held=0),
        0.1,
    )
    assert [h.name for h in rank_hosts([boastful, honest])] == ["honest", "boastful"]


def test_an_unusable_slot_directory_or_a_host_not_ready_has_no_slot() -> None:
    unusable = probe("unusable", Verdict.AT_CAPACITY, held=None, cause=Cause.SLOTS_UNUSABLE)
    down = probe("down", Verdict.UNREACHABLE, cause=Cause.CONNECT_REFUSED)
    assert free_slots(unusable.host, unusable, -1) is None and free_slots(down.host, down, 0) is None
    assert rank_hosts([unusable, down]) == []


def attempt(host: str, cause: Cause, kind: ErrorKind = ErrorKind.PORT_EXIT, retryable: bool = True) -> PlacementAttempt:
    return PlacementAttempt(host, f"u@{host}", kind, cause, retryable, "why")


def test_hosts_that_agree_make_the_placement_fail_as_each_did() -> None:
    missing = [attempt(h, Cause.WORKSPACE_INVALID, ErrorKind.INVALID_WORKSPACE_CWD, False) for h in ("a", "b")]
    error = placement_error(missing, "no host")
    assert (error.kind, error.cause, error.retryable) == (
        ErrorKind.INVALID_WORKSPACE_CWD,
        Cause.WORKSPACE_INVALID,
        False,
    )
    assert error.facts.attempts == tuple(missing)
    assert error.to_json()["facts"]["attempts"][1]["host"] == "b"


def test_hosts_that_disagree_are_no_host_available_when_waiting_can_help_else_the_first_permanent_cause() -> None:
    mixed = placement_error(
        [attempt("a", Cause.HOST_KEY_CHANGED, retryable=False), attempt("b", Cause.AT_CAPACITY)], "no host"
    )
    assert (mixed.kind, mixed.cause, mixed.retryable) == (ErrorKind.PORT_EXIT, Cause.NO_HOST_AVAILABLE, True)
    permanent = placement_error(
        [
            attempt("a", Cause.AUTH_FAILED, retryable=False),
            attempt("b", Cause.AGENT_NOT_FOUND, ErrorKind.AGENT_NOT_FOUND, False),
        ],
        "no host",
    )
    assert (permanent.kind, permanent.cause, permanent.retryable) == (ErrorKind.PORT_EXIT, Cause.AUTH_FAILED, False)


def test_a_placement_that_found_no_host_names_every_host_tried_or_not() -> None:
    a, b, c, d = (Host(name=n, capacity=2) for n in "abcd")
    tried = RemoteAcpError(ErrorKind.PORT_EXIT, "refused", cause=Cause.CONNECT_REFUSED)
    probes = {
        "b": probe("b"),
        "c": probe("c", Verdict.WORKSPACE_INVALID, cause=Cause.WORKSPACE_INVALID),
        "d": probe("d"),
    }
    error = unplaced_error([a, b, c, d], probes, {"b": 0, "d": 1}, [(a, tried)])
    got = {x.host: (x.kind, x.cause, x.retryable) for x in error.facts.attempts}
    assert got == {
        "a": (ErrorKind.PORT_EXIT, Cause.CONNECT_REFUSED, True),
        "b": (ErrorKind.PORT_EXIT, Cause.AT_CAPACITY, True),
        "c": (ErrorKind.INVALID_WORKSPACE_CWD, Cause.WORKSPACE_INVALID, False),
        "d": (ErrorKind.PORT_EXIT, Cause.NO_HOST_AVAILABLE, True),
    }
    assert error.message.startswith("the session could not start on any of the 4 hosts (1 tried): a: ")
    assert (error.cause, error.retryable) == (Cause.NO_HOST_AVAILABLE, True)


def test_a_pool_refuses_what_it_cannot_hold() -> None:
    with pytest.raises(ValueError, match="at least one host"):
        HostPool([])
    with pytest.raises(ValueError, match="distinct names"):
        HostPool([Host(name="a"), Host(name="a", address="b")])
    with pytest.raises(ValueError, match="max_attempts"):
        HostPool([Host(name="a")], max_attempts=0)


@pytest.mark.anyio
async def test_a_workspace_no_probe_can_carry_is_the_callers_mistake() -> None:
    pool = HostPool([Host(name="a")])
    with pytest.raises(RemoteAcpError) as info:
        async with pool.session("/w\0x", SessionOptions(command="agent")):
            pass
    assert (info.value.kind, info.value.cause, info.value.retryable) == (
        ErrorKind.INVALID_WORKSPACE_CWD,
        Cause.MISUSE,
        False,
    )
    assert pool.tries == {}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: nothing listens there


@pytest.fixture
def refusing(tmp_path: Path) -> HostPool:
    config = tmp_path / "ssh_config"
    config.write_text("")
    hosts = [Host(name=n, address="127.0.0.1", port=closed_port()) for n in ("a", "b")]
    settings = ProbeSettings(ssh_config=str(config), connect_timeout_s=5, known_hosts=str(tmp_path / "known"))
    return HostPool(hosts, probe_settings=settings, down_backoff_s=60)


@pytest.mark.anyio
@pytest.mark.both_backends
async def test_hosts_that_refuse_are_probed_once_however_many_ask_and_kept_out(refusing: HostPool) -> None:
    got: list[list[HostProbe]] = []

    async def ask() -> None:
        got.append(await refusing.probe("agent", "/w"))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for _ in range(6):
                tg.start_soon(ask)
        first = got[0]
        assert [(p.verdict, p.cause) for p in first] == [(Verdict.UNREACHABLE, Cause.CONNECT_REFUSED)] * 2
        # One probe per host, shared by every caller (the very same results).
        assert all(all(x is y for x, y in zip(g, first, strict=True)) for g in got)
        assert await refusing.rank("agent", "/w") == []

        # Kept out: the next placement probes nothing and tries nothing.
        with pytest.raises(RemoteAcpError) as info:
            async with refusing.session("/w", SessionOptions(command="agent")):
                pass
        again = await refusing.probe("agent", "/w")
        assert all(x is y for x, y in zip(again, first, strict=True))
        error = info.value
        assert (error.kind, error.cause, error.retryable) == (ErrorKind.PORT_EXIT, Cause.CONNECT_REFUSED, True)
        assert [a.host for a in error.facts.attempts] == ["a", "b"] and refusing.tries == {}
        assert error.message.startswith("no host of the 2 in the pool is ready: a: [connect_refused] unreachable")

        # Invalidated, a host is probed again (a new result), the other is not.
        refusing.invalidate("a")
        fresh = await refusing.probe("agent", "/w")
        assert fresh[0] is not first[0] and fresh[0].cause is Cause.CONNECT_REFUSED
        assert fresh[1] is first[1]


@pytest.mark.anyio
@pytest.mark.both_backends
async def test_waiting_for_a_slot_never_waits_for_hosts_that_are_down(refusing: HostPool) -> None:
    waits: list[object] = []
    with anyio.fail_after(30), pytest.raises(RemoteAcpError) as info:
        async with refusing.session("/w", SessionOptions(command="agent"), wait_for_slot_s=60, on_wait=waits.append):
            pass
    assert info.value.cause is Cause.CONNECT_REFUSED and waits == []
