"""Sessions placed on the fleet: a pool of hosts that hands out sessions on ready ones.

:class:`HostPool` keeps a view of each host for an agent and a workspace (``hostinv``'s probe:
login, workspace, agent, load, the agent slots held), ranks the ready ones (:func:`rank_hosts`:
a free slot first, then the lowest load per core, then the most free slots, then inventory
order) and starts the session on the first. It works on asyncio and trio alike.

- **Reservations.** A placement reserves its host in the pool before it starts, so placements
  made at once see each other and spread over the free slots.
- **One login per placement on a warm pool.** The session's own login runs the probe before the
  agent starts (:class:`~remote_acp.fleet.login_probe.LoginProbe` as the ssh preflight), and what
  it finds (load, slots held, a host gone not ready) becomes the pool's view of that host. The
  hosts are probed over asyncssh only when the pool has no fresh view of them
  (``probe_max_age_s``); concurrent probes of one host share one connection.
- **Failover.** A start that fails on a host falls over to the next host the pool believes free,
  whatever the cause (a missing workspace or a changed key on one host may not hold on another),
  except the caller's own mistakes (``config_invalid``, ``misuse``). Each host is tried once per
  placement; when none is left, :func:`placement_error` names every host and why.
- **Hosts that went away.** A connection-level failure (a cause whose verdict is
  ``unreachable``) keeps the host out of the ranking at once, for ``down_backoff_s`` doubling
  while it stays down; :meth:`HostPool.invalidate` drops what the pool knows of a host.
- **Waiting for a slot.** ``wait_for_slot_s`` waits, bounded and cancellable, while hosts of the
  pool are at capacity, instead of failing at once.

Capacity holds across processes because it is kept on the hosts: every session the pool starts
takes one of its host's agent slots there (:attr:`~remote_acp.targets.ssh.target.SshSettings.capacity`,
lock files the kernel releases when the session's processes end). The pool's count is an estimate
(the last probe's count, adjusted by the sessions this pool started and ended since); an estimate
too low costs one refused login, which corrects it.
"""

from __future__ import annotations

import contextlib
import math
import shlex
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import anyio

from hostinv.causes import CAUSES
from hostinv.probes import PER_ADDRESS, HostProbe, ProbeSettings, Verdict, probe_host

from ..errors import Cause, ErrorKind, RemoteAcpError
from ..logs import get_logger
from ..session.core import open_session
from ..targets.ssh.script import SLOT_DIR_PREFIX
from ..targets.ssh.settings import SshSettings
from .cache import resolve_cache_dir
from .check import host_target
from .login_probe import LoginProbe
from .ranking import free_slots, placement_error, rank_hosts, unplaced_error

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Mapping, Sequence

    from hostinv import Host

    from ..options import SessionOptions
    from ..session.core import Session

__all__ = ["Attempt", "HostPool", "Placement", "SlotWait", "placement_error", "rank_hosts"]

log = get_logger("remote_acp.fleet.pool")

MAX_DOWN_BACKOFF_S: Final = 300.0
# The caller's own mistakes: no other host would take the session either.
_CALLERS: Final = frozenset({Cause.CONFIG_INVALID, Cause.MISUSE})


@dataclass(frozen=True, slots=True)
class Attempt:
    """A host the pool tried before the one it placed the session on, and why it failed there."""

    host: Host
    error: RemoteAcpError


@dataclass(frozen=True, slots=True)
class Placement:
    """A session the pool started: where it runs, and the hosts tried first (in order)."""

    host: Host
    session: Session
    failed: tuple[Attempt, ...] = ()


@dataclass(frozen=True, slots=True)
class SlotWait:
    """Progress of a placement waiting for a free slot (``on_wait``): seconds waited so far,
    seconds left of the wait, and the hosts at capacity."""

    waited_s: float
    left_s: float
    full: tuple[str, ...]


@dataclass
class _View:
    """What the pool knows of one host for one agent and workspace."""

    probe: HostProbe | None = None
    at: float = -math.inf  # when the probe saw the host
    floor: float = -math.inf  # looks older than this are stale (invalidated since)
    base: int = 0  # this pool's sessions on the host then (started or starting)
    down_until: float = -math.inf
    downs: int = 0  # connection-level failures in a row
    inflight: anyio.Event | None = None  # a probe under way (single flight)


@dataclass
class _Observed:
    """A session's login probe (its preflight), noting when it saw the host and the pool's count."""

    probe: LoginProbe
    count: Callable[[], int]
    at: float = -math.inf
    base: int = 0

    @property
    def script(self) -> str:
        return self.probe.script

    @property
    def bound_ms(self) -> int:
        return self.probe.bound_ms

    def admit(self, printed: bytes) -> RemoteAcpError | None:
        self.at, self.base = time.monotonic(), self.count() - 1  # less this session's reservation
        return self.probe.admit(printed)


@dataclass
class HostPool:
    """Hosts that sessions are placed on (see the module docstring).

    ``settings``: how ``ssh`` runs for every session (each host's inventory settings and capacity
    are added to them). ``probe_settings``: how hosts are probed (default: the same ssh_config and
    host key policy, and the agent slots counted). ``probe_max_age_s``: how long the pool's view
    of a host is used before it probes the host again (a session's login renews it).
    ``max_attempts``: starts tried per placement (``None``: each host once, and with a wait, once
    more each time a slot frees). ``down_backoff_s``: how long a host that could not be reached is
    left out, doubled each time it still cannot be. ``slot_poll_s``: while a placement waits for a
    slot, how often hosts at capacity are probed again (slots freed by other controllers).
    ``concurrency``: probes at once.
    """

    hosts: Sequence[Host]
    settings: SshSettings = field(default_factory=SshSettings)
    probe_settings: ProbeSettings | None = None
    probe_max_age_s: float = 30.0
    max_attempts: int | None = None
    concurrency: int = 32
    down_backoff_s: float = 10.0
    slot_poll_s: float = 2.0
    _running: Counter[str] = field(default_factory=Counter, init=False, repr=False)
    _starting: Counter[str] = field(default_factory=Counter, init=False, repr=False)
    _tries: Counter[str] = field(default_factory=Counter, init=False, repr=False)
    _views: dict[tuple[str, str], dict[str, _View]] = field(default_factory=dict, init=False, repr=False)
    _changed: anyio.Event | None = field(default=None, init=False, repr=False)
    _limiter: anyio.CapacityLimiter | None = field(default=None, init=False, repr=False)
    _per_address: dict[tuple[str, int | None], anyio.Semaphore] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.hosts:
            raise ValueError("a host pool needs at least one host")
        if len({h.name for h in self.hosts}) != len(self.hosts):
            raise ValueError("the hosts of a pool need distinct names")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.probe_settings is None:
            policy = self.settings.host_key_policy
            self.probe_settings = ProbeSettings(
                ssh_config=self.settings.config_file,
                host_key_policy="yes" if policy == "yes" else "accept-new",
                connect_timeout_s=float(self.settings.connect_timeout_s),
                slot_prefix=SLOT_DIR_PREFIX,
                resolve_cache=str(resolve_cache_dir()),
            )

    @property
    def opened(self) -> Mapping[str, int]:
        """Sessions this pool holds open now, by host name."""
        return {name: count for name, count in self._running.items() if count}

    @property
    def tries(self) -> Mapping[str, int]:
        """Session starts this pool has attempted, by host name (successful or not)."""
        return dict(self._tries)

    def invalidate(self, host_name: str) -> None:
        """Forget what the pool knows of ``host_name`` (its probes, its backoff): the next
        placement probes it again before trying it. For a caller that saw it fail (a lost link)."""
        for views in self._views.values():
            view = views.get(host_name)
            if view is not None and view.inflight is None:
                # A start that looked at the host before now must not bring its old view back.
                views[host_name] = _View(floor=time.monotonic())
        self._notify()

    async def probe(self, agent_program: str, workspace: str) -> list[HostProbe]:
        """Every host's probe for ``agent_program`` in ``workspace``: the pool's view, probed
        again where it is older than ``probe_max_age_s`` (one probe per host however many ask)."""
        _carriable(agent_program, workspace)
        key = (agent_program, workspace)
        await self._refresh(key)
        views = self._views[key]
        return [views[h.name].probe or self._unknown(h) for h in self.hosts]

    async def rank(self, agent_program: str, workspace: str) -> list[Host]:
        """The ready hosts, best first (:func:`rank_hosts`), counting the sessions this pool has
        started or is starting since each host's probe."""
        results = await self.probe(agent_program, workspace)
        views = self._views[(agent_program, workspace)]
        return rank_hosts(results, {h.name: self._count(h.name) - views[h.name].base for h in self.hosts})

    @contextlib.asynccontextmanager
    async def session(
        self,
        workspace: str,
        options: SessionOptions,
        *,
        resume: str | None = None,
        wait_for_slot_s: float = 0.0,
        on_wait: Callable[[SlotWait], None] | None = None,
    ) -> AsyncIterator[Placement]:
        """A session of ``options.command`` in ``workspace`` on the best ready host, closed on exit.

        ``wait_for_slot_s``: when every host that could take the session is at capacity, wait up
        to this long for a slot (``on_wait`` sees the progress) instead of failing at once.

        :raises RemoteAcpError: the caller's own mistake as it is; else, when no host took the
            session, :func:`placement_error` over every host (the hosts' shared kind and cause
            when they agree, ``port_exit`` and ``no_host_available`` or the first permanent cause
            when not), every host tried and why in ``facts.attempts``.
        """
        program = _program(options.command)
        _carriable(program, workspace)
        key = (program, workspace)
        failed: list[Attempt] = []
        tried: set[str] = set()
        began = time.monotonic()
        async with contextlib.AsyncExitStack() as stack:
            while True:
                await self._refresh(key)
                host = None
                if self.max_attempts is None or len(failed) < self.max_attempts:
                    host = self._reserve(key, tried)
                if host is None:
                    full = self._full(key, failed)
                    left = began + wait_for_slot_s - time.monotonic()
                    if not full or left <= 0 or (self.max_attempts is not None and len(failed) >= self.max_attempts):
                        raise self._no_host(key, failed)
                    if on_wait is not None:
                        on_wait(SlotWait(time.monotonic() - began, left, tuple(full)))
                    if not await self._wait_change(min(left, self.slot_poll_s)):
                        self._forget(key, full)  # slots freed by other controllers show in a new probe
                    tried -= set(full)
                    continue
                tried.add(host.name)
                observed = self._login_probe(host, program, workspace)
                error: RemoteAcpError | None = None
                started = False
                try:
                    target = host_target(host, self.settings, take_slot=True, preflight=observed)
                    session = await stack.enter_async_context(open_session(workspace, options, target, resume=resume))
                    started = True
                except ValueError as exc:  # the host's ssh options in the inventory: ssh never ran
                    error = RemoteAcpError(ErrorKind.PORT_EXIT, str(exc), cause=Cause.SSH_CONFIG_INVALID)
                except RemoteAcpError as exc:
                    error = exc
                finally:  # a cancelled start gives its reservation back too
                    self._ended(key, host, observed, started, error)
                if started:
                    stack.callback(self._closed, host.name)
                    yield Placement(host, session, tuple(failed))
                    return
                assert error is not None
                if error.cause in _CALLERS:
                    raise error
                failed.append(Attempt(host, error))
                log.info(
                    "could not start on %s (%s), trying another host: %s",
                    host.name,
                    error.cause.value,
                    _one_line(error.message),
                    extra={"host": host.name},
                )

    # -- the pool's view ------------------------------------------------------------------------

    def _count(self, name: str) -> int:
        return self._running[name] + self._starting[name]

    def _unknown(self, host: Host) -> HostProbe:
        return HostProbe(host, Verdict.PROBE_FAILED, "not probed", None, None, 0.0, Cause.PROBE_INCOMPLETE)

    def _stale(self, view: _View, now: float) -> bool:
        return view.down_until <= now and (view.probe is None or now - view.at > self.probe_max_age_s)

    async def _refresh(self, key: tuple[str, str]) -> None:
        views = self._views.setdefault(key, {h.name: _View() for h in self.hosts})
        now = time.monotonic()
        stale = [h for h in self.hosts if self._stale(views[h.name], now)]
        if len(stale) <= 1:
            for host in stale:
                await self._probe_one(key, host)
            return
        async with anyio.create_task_group() as tg:
            for host in stale:
                tg.start_soon(self._probe_one, key, host)

    async def _probe_one(self, key: tuple[str, str], host: Host) -> None:
        views = self._views[key]
        while self._stale(views[host.name], time.monotonic()):
            view = views[host.name]
            if view.inflight is not None:  # another caller's probe: share it
                await view.inflight.wait()
                continue
            view.inflight = done = anyio.Event()
            try:
                if self._limiter is None:
                    self._limiter = anyio.CapacityLimiter(max(1, self.concurrency))
                address = (host.address or host.name, host.port)
                same = self._per_address.setdefault(address, anyio.Semaphore(PER_ADDRESS))
                assert self.probe_settings is not None
                async with self._limiter, same:
                    result = await probe_host(host, key[0], key[1], self.probe_settings)
                self._store(key, host, result, time.monotonic(), self._count(host.name))
            finally:
                view.inflight = None
                done.set()
            return

    def _store(
        self, key: tuple[str, str], host: Host, probe: HostProbe, at: float, base: int, *, failed: bool = False
    ) -> None:
        view = self._views[key][host.name]
        if at < view.at or at < view.floor:
            return  # a newer look is kept
        view.probe, view.at, view.base = probe, at, base
        if (
            failed
            or probe.verdict is Verdict.UNREACHABLE
            or (probe.cause is not None and CAUSES[probe.cause].verdict == Verdict.UNREACHABLE)
        ):
            view.downs += 1
            backoff = min(self.down_backoff_s * 2 ** min(view.downs - 1, 16), MAX_DOWN_BACKOFF_S)
            view.down_until = at + max(backoff, self.probe_max_age_s)
        else:
            view.downs, view.down_until = 0, -math.inf
        self._notify()

    def _forget(self, key: tuple[str, str], names: Sequence[str]) -> None:
        views = self._views[key]
        for name in names:
            if views[name].inflight is None and views[name].down_until <= time.monotonic():
                views[name].at = -math.inf

    def _ranked(self, key: tuple[str, str]) -> list[tuple[Host, int]]:
        """Every host with a slot for the session by the pool's view, best first, and its free slots."""
        views = self._views[key]
        now = time.monotonic()
        probes = [v.probe for h in self.hosts if (v := views[h.name]).probe is not None and v.down_until <= now]
        deltas = {h.name: self._count(h.name) - views[h.name].base for h in self.hosts}
        order = rank_hosts(probes, deltas)
        by_name = {p.host.name: p for p in probes}
        return [(h, free_slots(h, by_name[h.name], deltas[h.name]) or 0) for h in order]

    def _reserve(self, key: tuple[str, str], tried: set[str]) -> Host | None:
        """The best host not yet tried that the pool believes has a free slot, reserved. No
        await between the choice and the reservation: placements at once see each other's."""
        for host, free in self._ranked(key):
            if free > 0 and host.name not in tried:
                self._starting[host.name] += 1
                self._tries[host.name] += 1
                return host
        return None

    def _full(self, key: tuple[str, str], failed: Sequence[Attempt]) -> list[str]:
        """Hosts that could take the session once a slot frees there."""
        full = {h.name for h, free in self._ranked(key) if free <= 0}
        full |= {a.host.name for a in failed if a.error.cause is Cause.AT_CAPACITY}
        return [h.name for h in self.hosts if h.name in full]

    def _login_probe(self, host: Host, program: str, workspace: str) -> _Observed:
        settings = self.probe_settings
        assert settings is not None
        probe = LoginProbe(
            host,
            program,
            workspace,
            version_timeout_s=max(1, math.ceil(settings.version_timeout_s)),
            login_lookup=settings.login_lookup,
            slot_prefix=settings.slot_prefix,
        )
        return _Observed(probe, lambda: self._count(host.name))

    def _ended(
        self, key: tuple[str, str], host: Host, observed: _Observed, started: bool, error: RemoteAcpError | None
    ) -> None:
        """A start on ``host`` ended (``error``: how it failed; neither: cancelled): its reservation
        becomes a running session or goes, and what the start learned of the host becomes the
        pool's view."""
        self._starting[host.name] -= 1
        self._running[host.name] += started
        found = observed.probe.result
        if found is not None:
            self._store(key, host, found, observed.at, observed.base)
        if error is not None and error.cause not in _CALLERS and (found is None or found.ready):
            if error.cause is not Cause.AT_CAPACITY:  # a full host is the slots' business
                # The host took the login and then failed the start (down, refusing, or an agent that
                # never answers): keep it out, backing off each time, so that a host which looks
                # best by its own figures cannot draw every placement into its failure.
                verdict = CAUSES[error.cause].verdict
                judged = Verdict(verdict) if verdict else Verdict.AGENT_FAILED
                gone = HostProbe(host, judged, error.message, error.fix or None, None, 0.0, error.cause)
                self._store(key, host, gone, time.monotonic(), self._count(host.name), failed=True)
        self._notify()

    def _closed(self, name: str) -> None:
        self._running[name] -= 1
        self._notify()

    # -- waiting ----------------------------------------------------------------------------------

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def _wait_change(self, within_s: float) -> bool:
        """Wait until a session ends or a view changes (``True``), or ``within_s`` passes."""
        if self._changed is None:
            self._changed = anyio.Event()
        changed = self._changed
        with anyio.move_on_after(within_s):
            await changed.wait()
            return True
        return False

    # -- failing ----------------------------------------------------------------------------------

    def _no_host(self, key: tuple[str, str], failed: Sequence[Attempt]) -> RemoteAcpError:
        views = self._views[key]
        probes = {h.name: views[h.name].probe or self._unknown(h) for h in self.hosts}
        free = {h.name: n for h, n in self._ranked(key)}
        error = unplaced_error(self.hosts, probes, free, [(a.host, a.error) for a in failed])
        return error.with_facts(workspace=key[1])  # the fix names it


def _carriable(program: str, workspace: str) -> None:
    """Refuse what no probe and no session can carry (the caller's own mistake)."""
    if "\0" in program:
        raise RemoteAcpError(ErrorKind.AGENT_NOT_FOUND, "the agent command holds a NUL byte", cause=Cause.MISUSE)
    if "\0" in workspace:
        raise RemoteAcpError(ErrorKind.INVALID_WORKSPACE_CWD, "the workspace holds a NUL byte", cause=Cause.MISUSE)


def _one_line(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "\u2026"


def _program(command: str | Sequence[str]) -> str:
    """The agent program (what a probe looks for): the command's first word."""
    try:
        words = shlex.split(command) if isinstance(command, str) else list(command)
    except ValueError as exc:  # an unbalanced quote
        raise RemoteAcpError(ErrorKind.AGENT_NOT_FOUND, f"the agent command does not read as words: {exc}") from None
    if not words:
        raise RemoteAcpError(ErrorKind.AGENT_NOT_FOUND, "the agent command is empty or whitespace-only")
    return words[0]
