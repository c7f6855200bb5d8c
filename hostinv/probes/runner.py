"""Probing hosts over asyncssh: one connection per host, one channel, one verdict, never a prompt.

For each host the runner asks ``ssh -G`` what ``ssh`` would use (:mod:`hostinv.sshopts`: HostName,
Port, User, IdentityFile, ProxyJump, ProxyCommand, known_hosts files, HashKnownHosts,
StrictHostKeyChecking, RevokedHostKeys, KnownHostsCommand and VerifyHostKeyDNS, through every
``Host``/``Match``/``Include`` and the system config), with the :class:`~hostinv.models.Host`
fields as command-line overrides, then connects with all of it
explicitly (:mod:`.connect`), runs :data:`~hostinv.probes.PROBE_COMMAND` with
:func:`~hostinv.probes.probe_script` on stdin, reads its output within bounds (:mod:`.channel`:
it stops at the report's end line, whatever a login prints or leaves running) and judges the
report. Jump hosts (``ProxyJump``, each hop resolved and checked the same way) are connections
of their own.

Host keys (:mod:`.host_keys`) follow the policy ssh's configuration sets for each host and hop,
which the caller's :attr:`ProbeSettings.host_key_policy` may tighten and never loosens. ``ssh -G``
prints ssh's default (``ask``) for a host nothing sets a policy for, so it is asked through a
config of our own (:func:`~hostinv.sshopts.fallback_config_text`) that includes what ssh reads
and then gives such a host ``accept-new``, as sessions do. A key no known_hosts file holds is
``host_key_changed`` when the files hold another key for the host (refused, with the exact
``ssh-keygen -R`` line), else refused under ``yes``/``ask`` (``host_key_unknown``, nothing
written) and under ``accept-new`` appended to the first ``UserKnownHostsFile`` as ssh would
(hashed when ``HashKnownHosts`` says so), so a later ``ssh`` or session finds it known. A key
``RevokedHostKeys`` lists is refused, known or not (``host_key_changed``), and a file no key can be
checked against refuses every key. A host whose key ssh also verifies through ``KnownHostsCommand``
or DNS (``VerifyHostKeyDNS``), which the probe does not consult, gets no key written and none
trusted but those the known_hosts files hold (``host_key_unknown``).

Nothing here raises for a host's problem: every failure is a :class:`~hostinv.probes.HostProbe`
with a verdict, and a report that came back is judged by :meth:`~hostinv.probes.HostProbe.from_output`,
as a probe run in a session's login is.
asyncssh is imported on the first probe, never when :mod:`hostinv` is imported.

Event loops: asyncssh runs on asyncio only. Called from asyncio, the probes run on the caller's
loop; called from any other loop anyio runs on (trio), they run on an asyncio loop of their own in
a worker thread, which a cancelled caller cancels and waits for, so nothing outlives the call.

Concurrency: :func:`probe_hosts` bounds the connections in flight with one semaphore. Every host
gets one connection, so a host sees one handshake per inventory entry; entries sharing an address
are held to :data:`PER_ADDRESS` at once. A jump host shared by many targets sees one per target
behind it, and sshd's ``MaxStartups`` (10 unauthenticated by default) may drop some past that
(``unreachable``, "closed before login"): keep ``concurrency`` near 8 behind one jump host.
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import os
import shutil
import tempfile
import threading
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from .. import resolve_cache
from ..causes import Cause, fix_for
from ..keep import untrusted, write_whole
from ..sshopts import ResolvedSsh, fallback_config_text, login_home, parse_jump, parse_ssh_g, ssh_g_argv
from .channel import REPORT_KEPT, ChannelRead, read_report
from .command import PROBE_COMMAND, probe_script
from .connect import asyncssh_module, connect, judge_connect_error, key_check, mask
from .host_keys import HostKeyCheck
from .loops import on_asyncio, on_own_loop
from .result import HostProbe
from .verdicts import Judgement, Verdict

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ..models import Host

__all__ = [
    "PER_ADDRESS",
    "HostKeyCheck",
    "ProbeSettings",
    "judge_connect_error",
    "probe_host",
    "probe_hosts",
]

_SSH_G_TIMEOUT_S = 10.0
_SSH_CHATTER = ("debug", "OpenSSH_", "Pseudo-terminal")  # -v's lines, not why ssh -G failed
PER_ADDRESS = 8
"""Probes at once to one address (two inventory names for one host), below sshd's default
``MaxStartups`` of 10 unauthenticated connections, past which it drops new ones at random."""


@dataclass(frozen=True, slots=True)
class ProbeSettings:
    """How probes connect. ``ssh_config``: a file read instead of ssh's usual ones (as ``ssh -F``);
    ``None``: what ``ssh`` reads (``~/.ssh/config``, then the system file). ``known_hosts``: the
    file to read and add keys to instead of ``UserKnownHostsFile``. ``command_timeout_s`` bounds
    the whole probe after login; ``version_timeout_s`` the agent's ``--version`` within it (whole
    seconds on the host, rounded up). ``login_lookup``: ask the login shell for its PATH when the
    agent is not on the session's (it runs the user's profile). ``slot_prefix``: where sessions
    keep the host's agent slots, less the user id (the session layer's convention); set, the
    probe counts the slots held and a host with as many as its capacity is ``at_capacity``.
    ``resolve_cache``: a directory where ``ssh -G``'s answers are kept while the files ssh read
    are unchanged (:mod:`hostinv.resolve_cache`); ``None``: ask ssh every time.
    ``host_key_policy``: the least strict host-key policy a probe applies: the policy ssh's
    configuration sets for the host wins when it is stricter (``yes`` or ``ask`` refuse a new key
    even under ``accept-new``), so the default never loosens a configuration."""

    connect_timeout_s: float = 10.0
    command_timeout_s: float = 20.0
    ssh_config: str | None = None
    host_key_policy: Literal["accept-new", "yes"] = "accept-new"
    known_hosts: str | None = None
    version_timeout_s: float = 2.0
    login_lookup: bool = True
    slot_prefix: str = ""
    resolve_cache: str | None = None


async def _resolve(
    destination: str,
    settings: ProbeSettings,
    *,
    port: int | None = None,
    user: str | None = None,
    identity_file: str | None = None,
    options: dict[str, str] | None = None,
) -> ResolvedSsh:
    cache = settings.resolve_cache
    if cache is not None and untrusted(cache) is not None:
        cache = None  # another user could have written it: neither read nor add to it
    ours = _policy_config(settings.ssh_config, cache)
    argv = ssh_g_argv(
        destination,
        config=ours or settings.ssh_config,
        port=port,
        user=user,
        identity_file=identity_file,
        options=options,
    )
    name = ""
    if cache is not None:
        name = resolve_cache.entry_name(argv, resolve_cache.which_ssh(os.environ), environ=os.environ)
        kept = resolve_cache.lookup(cache, name, os.environ)
        if kept is not None:
            return parse_ssh_g(kept)
        argv = resolve_cache.verbose(argv)
    started = time.time_ns()
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), _SSH_G_TIMEOUT_S)
    except BaseException:
        if process.returncode is None:
            process.kill()
            await process.wait()
        raise
    said = err.decode(errors="replace")
    if process.returncode != 0:
        lines = [line for line in said.splitlines() if line.strip() and not line.startswith(_SSH_CHATTER)]
        raise _ResolveError(lines[0] if lines else f"ssh -G exited {process.returncode}")  # the first says why
    answer = out.decode(errors="replace")
    resolved = parse_ssh_g(answer)
    if cache is not None:
        resolve_cache.store_answer(
            cache,
            name,
            answer,
            stderr=said,
            config=settings.ssh_config,
            environ=os.environ,
            since_ns=started,
            ours=ours,
        )
    return resolved


_PRIVATE: list[str] = []
_PRIVATE_LOCK = threading.Lock()  # probes run on worker threads' loops under trio


def _private_dir() -> str:
    """A directory of this process's own (mode 0700), removed when it exits."""
    with _PRIVATE_LOCK:
        if not _PRIVATE:
            _PRIVATE.append(tempfile.mkdtemp(prefix="hostinv-"))
            atexit.register(shutil.rmtree, _PRIVATE[0], True)
        return _PRIVATE[0]


def _policy_config(config: str | None, cache: str | None) -> str | None:
    """The file given to ``ssh -G -F`` so that it reports the host-key policy for a host the
    configuration sets none for as ours (:func:`~hostinv.sshopts.fallback_config_text`), named by
    its contents' digest and written once, into ``cache`` (trusted already) or else a directory
    of this process's own. ``None`` when ``config`` is a file ssh cannot read (ssh is then given
    it, and says why) or no file can be written (ssh's default ``ask`` then reads as ``ask``,
    the stricter)."""
    if config is not None and config.lower() != "none" and not (os.path.isfile(config) and os.access(config, os.R_OK)):
        return None
    try:
        data = fallback_config_text(config, home=login_home(), by="hostinv").encode("utf-8", "surrogateescape")
    except ValueError:  # a path no ssh_config line can hold
        return None
    file_name = f"policy-{hashlib.sha256(data).hexdigest()[:32]}.conf"
    if cache is not None:
        path = os.path.join(cache, file_name)
        if _holds(path, data):
            return path
        try:
            os.makedirs(cache, mode=0o700, exist_ok=True)
            write_whole(path, data, prefix=".policy-")
            return path
        except OSError:
            pass  # a cache that cannot be written only costs the reuse
    try:
        path = os.path.join(_private_dir(), file_name)
        if not _holds(path, data):
            write_whole(path, data, prefix=".policy-")
    except OSError:
        return None
    return path


def _holds(path: str, data: bytes) -> bool:
    try:
        with open(path, "rb") as file:
            return file.read(len(data) + 1) == data
    except OSError:
        return False


class _ResolveError(Exception):
    pass


def _finish(host: Host, judgement: Judgement, started: float) -> HostProbe:
    return HostProbe.from_judgement(host, judgement, latency_s=time.monotonic() - started)


async def probe_host(host: Host, agent: str, workspace: str, settings: ProbeSettings = ProbeSettings()) -> HostProbe:
    """Probe one host for ``agent`` (the program: the first word of the agent command) and
    ``workspace``, on asyncio or trio. Never raises for a host's problem; ``ValueError`` only
    for an agent or workspace the probe cannot carry (empty agent, a NUL byte)."""
    if on_asyncio():
        return await _probe_host(host, agent, workspace, settings)
    return await on_own_loop(lambda: _probe_host(host, agent, workspace, settings))


async def _probe_host(host: Host, agent: str, workspace: str, settings: ProbeSettings) -> HostProbe:
    script = probe_script(
        agent,
        workspace,
        version_timeout_s=max(1, int(-(-settings.version_timeout_s // 1))),
        login_lookup=settings.login_lookup,
        slot_prefix=settings.slot_prefix,
    )
    started = time.monotonic()
    destination = host.address or host.name
    async with AsyncExitStack() as stack:
        tunnel: Any = None
        via: str | None = None
        check: HostKeyCheck | None = None
        resolved: ResolvedSsh | None = None
        shown = host.destination
        try:
            resolved = await _resolve(
                destination,
                settings,
                port=host.port,
                user=host.user,
                identity_file=host.identity_file,
                options=dict(host.ssh_options),
            )
            # Imported only once this host's ssh -G is done: probes start together, so the other
            # hosts' ssh -G run on the other cores meanwhile (the import is most of a start-up).
            asyncssh = asyncssh_module()
            for hop in filter(None, (resolved.proxy_jump or "").split(",")):
                hop_host, hop_port, hop_user = parse_jump(hop)
                shown = f"the jump host {hop}"
                hop_resolved = await _resolve(hop_host, settings, port=hop_port, user=hop_user)
                check = _check(hop_resolved, settings)
                tunnel = await stack.enter_async_context(
                    await connect(
                        hop_resolved, check, timeout_s=settings.connect_timeout_s, tunnel=tunnel, original=hop_host
                    )
                )
            shown = host.destination
            via = resolved.proxy_jump.split(",")[-1] if resolved.proxy_jump else None
            check = _check(resolved, settings)
            conn = await stack.enter_async_context(
                await connect(
                    resolved, check, timeout_s=settings.connect_timeout_s, tunnel=tunnel, original=destination
                )
            )
        except (_ResolveError, ValueError) as exc:
            return _finish(
                host,
                Judgement(
                    Verdict.UNREACHABLE,
                    f"ssh could not resolve {destination!r} from its config: {mask(str(exc))}",
                    fix_for(Cause.SSH_CONFIG_INVALID),
                    Cause.SSH_CONFIG_INVALID,
                ),
                started,
            )
        except (OSError, asyncssh_module().Error) as exc:  # TimeoutError is an OSError
            target = check.resolved if check is not None else resolved
            judgement = judge_connect_error(
                exc,
                destination=shown,
                address=target.hostname if target else destination,
                port=target.port if target else (host.port or 22),
                connect_timeout_s=settings.connect_timeout_s,
                key_check=check,
                via=via,
                proxy_command=target.proxy_command if target else None,
            )
            return _finish(host, judgement, started)
        try:
            read = await read_report(
                conn, PROBE_COMMAND, script.encode("utf-8", "surrogateescape"), settings.command_timeout_s
            )
        except (OSError, asyncssh.Error) as exc:
            return _finish(
                host,
                Judgement(
                    Verdict.PROBE_FAILED,
                    f"logged in, but the probe's channel failed: {type(exc).__name__}: {mask(str(exc))}",
                    fix_for(Cause.PROBE_INCOMPLETE),
                    Cause.PROBE_INCOMPLETE,
                ),
                started,
            )
    return _judge_read(read, host, agent, workspace, settings, started)


def _check(resolved: ResolvedSsh, settings: ProbeSettings) -> HostKeyCheck:
    return key_check(resolved, requested=settings.host_key_policy, known_hosts=settings.known_hosts)


def _judge_read(
    read: ChannelRead, host: Host, agent: str, workspace: str, settings: ProbeSettings, started: float
) -> HostProbe:
    if read.ending == "overflow":
        judgement = Judgement(
            Verdict.PROBE_FAILED,
            f"the probe's report ran past {REPORT_KEPT // 1024} KiB without its end line (something on the host "
            f"writes into it); stopped reading: {mask(read.text[-200:])}",
            fix_for(Cause.PROBE_INCOMPLETE),
            Cause.PROBE_INCOMPLETE,
        )
        return _finish(host, judgement, started)
    probe = HostProbe.from_output(
        host,
        read.text,
        agent,
        workspace,
        slots_counted=bool(settings.slot_prefix),
        latency_s=time.monotonic() - started,
        stderr_tail=mask(read.stderr_tail),
    )
    if probe.report is None and read.ending == "timeout":
        lead = f"the probe did not finish within {settings.command_timeout_s:g} s"
        if read.before > REPORT_KEPT:
            lead += f" (the login printed {_size(read.before)} before it)"
        probe = replace(probe, message=f"{lead}; {probe.message}")
    return probe


def _size(count: int) -> str:
    return f"{count / 2**20:.0f} MiB" if count >= 2**20 else f"{count // 1024} KiB"


async def probe_hosts(
    hosts: Sequence[Host],
    agent: str,
    workspace: str,
    settings: ProbeSettings = ProbeSettings(),
    *,
    concurrency: int = 32,
    on_done: Callable[[HostProbe], None] | None = None,
) -> list[HostProbe]:
    """Probe ``hosts`` in parallel, at most ``concurrency`` at once, results in input order, on
    asyncio or trio. ``on_done`` is called with each result as it finishes (for progress), in
    the caller's thread."""
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    if on_asyncio():
        return await _probe_hosts(hosts, agent, workspace, settings, concurrency, on_done)
    # Here: only a caller off asyncio (trio) comes this way.
    import anyio
    import anyio.from_thread

    token = anyio.lowlevel.current_token()

    def done_here(result: HostProbe) -> None:  # called in the worker thread
        assert on_done is not None
        anyio.from_thread.run_sync(on_done, result, token=token)

    report = done_here if on_done is not None else None
    return await on_own_loop(lambda: _probe_hosts(hosts, agent, workspace, settings, concurrency, report))


async def _probe_hosts(
    hosts: Sequence[Host],
    agent: str,
    workspace: str,
    settings: ProbeSettings,
    concurrency: int,
    on_done: Callable[[HostProbe], None] | None,
) -> list[HostProbe]:
    limit = asyncio.Semaphore(concurrency)
    per_address: dict[tuple[str, int | None], asyncio.Semaphore] = {}

    async def one(host: Host) -> HostProbe:
        same = per_address.setdefault((host.address or host.name, host.port), asyncio.Semaphore(PER_ADDRESS))
        async with same, limit:
            result = await _probe_host(host, agent, workspace, settings)
        if on_done is not None:
            on_done(result)
        return result

    return list(await asyncio.gather(*(one(h) for h in hosts)))
