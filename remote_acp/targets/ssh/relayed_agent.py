"""The agent's end of a session with a reattach window: one stream across successive ssh links.

The agent runs under the host's relay (:mod:`remote_acp.targets.ssh.relay`), and
:class:`RelayedAgent` stands where a local process would
(:class:`~remote_acp.targets.agent_end.AgentEnd`), owning the ssh of the moment and the session's
:class:`~remote_acp.targets.ssh.relay.link.Link`. On the first connection the session's
connection runs the ready marker and go-ahead as for any ssh start; this end watches for the
same marker, hands over exactly the bytes up to it, writes the start (or attach) request after
the go-ahead and reads the relay's header itself. From then on output goes through the link
(each byte handed on once, acknowledged at line ends so a later controller starts at a whole
line) and every input write is a ``D`` frame; a ``P`` every few seconds tells the relay we are
there. An ssh whose output ends without the relay's end report (``RA-END`` on stderr) is a lost
link: the session is told (:class:`~remote_acp.targets.agent_end.LinkWatcher`) and new ssh
processes run the attach login with backoff until one attaches or the window is over; the host
replays what the session lacks and applies the input it lacks. At the end the relay reports the
agent's status with the last offset; once that is received it is acknowledged, the connection
closed, and the relay removes the session. Closing the session sends ``X`` (the host ends the
agent's tree) before stdin's ``E``; a session closed while its link is down is ended by the host
when its window runs out.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from ...errors import RemoteAcpError
from ...logs import get_logger
from ..agent_end import RelayRef
from ..exit_status import ExitStatus
from ..launch import Ready
from ..process.agent import AgentProcess, PipeClosed
from .ready_marker import ReadyMarker
from .relay.attach import END_MARK, PING_S, REFUSED_MARK
from .relay.link import Link, parse_attach_reply
from .relink import (
    ACK_BYTES,
    ACK_S,
    DETACH_WAIT_S,
    END_WAIT_S,
    HEADER_MAX,
    MAX_ATTEMPTS,
    Phase,
    Relink,
    SessionRef,
    host_text,
    login,
    next_attempt_in,
    parse_end,
    protocol_error,
    refusal,
    retire,
    window_over,
)

if TYPE_CHECKING:
    from ..agent_end import LinkWatcher
    from ..stderr_tail import StderrTail

__all__ = ["RelayedAgent"]

log = get_logger("remote_acp.targets.ssh.relayed_agent")


class RelayedAgent:
    """One session's agent, kept on the host by its relay, across ssh connections (see the module docstring)."""

    def __init__(self, first: AgentProcess, relink: Relink, ref: SessionRef, *, resume: bool, tail_bytes: int) -> None:
        self.pid = first.pid  # the first ssh's: the session's for its whole life
        self.ref = ref
        self.relink = relink
        self.watcher: LinkWatcher | None = None
        self.exit_status: ExitStatus | None = None
        self.exited = anyio.Event()
        self.linked = anyio.Event()
        self.stdout_eof = anyio.Event()
        self.stderr_eof = anyio.Event()
        self.reattached = 0  # times the link was restored
        self._proc = first
        self._procs = [first]
        self._link = link = Link(ref.relay_id, ref.secret)
        self._request = link.resume_request() if resume else link.start_request()
        self._resume = resume
        self._tail_bytes = tail_bytes
        self._phase = Phase.PRELUDE
        self._marker = ReadyMarker(opening=b"", marker=relink.marker).begin()
        self._raw_left = -1  # bytes still written raw: all of them until the marker, then the go-ahead
        self._pushback = b""
        self._header = bytearray()
        self._end: tuple[int, int | None] | None = None
        self._finishing = False
        self._ending_sent = False
        self._closing = False
        self._lost: RemoteAcpError | None = None
        self._line_end = 0  # the output offset after the last newline received
        self._acked_at = 0.0
        self._lock = anyio.Lock()  # one writer at a time, and the link's counts move with the writes
        self._tg: anyio.abc.TaskGroup | None = None
        self._reconnecting: anyio.CancelScope | None = None
        self._settled = anyio.Event()  # a reconnect attempt attached, or the session cannot go on
        self._gate = anyio.Lock()  # one attempt at a time goes past its login
        self._tg_ready = anyio.Event()
        first.stderr_tail.watch_lines(END_MARK.encode(), self._on_end_line)

    @property
    def stderr_tail(self) -> StderrTail:
        """The current ssh's stderr (the agent's own comes at the session's end, its last lines)."""
        return self._proc.stderr_tail

    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def lost_error(self) -> RemoteAcpError | None:
        return self._lost

    def watch_link(self, watcher: LinkWatcher) -> None:
        self.watcher = watcher

    @property
    def relay(self) -> RelayRef:
        relink = self.relink
        return RelayRef(relink.destination, self.ref.relay_id, self.ref.secret, relink.window_s, relink.config_file)

    async def detach(self) -> bool:
        """End this controller's link without a word to the relay: it keeps the agent for its window."""
        if self._phase is Phase.DONE:
            return False
        self._closing = True
        if self._reconnecting is not None:
            self._reconnecting.cancel()
        # What this controller had is acknowledged: the next one starts after it.
        await self._write(self._link.ack(upto=self._line_end, force=True))
        await retire(self._proc, grace_s=DETACH_WAIT_S)
        await self._finish(self._proc)
        return True

    async def watch_exit(self) -> None:
        """Host each ssh's own tasks (its exit, its stderr) until the session's end (a task)."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            self._tg_ready.set()
            self._run(self._proc)
            tg.start_soon(self._ping)
            await self.exited.wait()
            tg.cancel_scope.cancel()

    async def drain_stderr(self) -> None:  # each ssh's is drained by its own task
        await self.exited.wait()
        with anyio.move_on_after(END_WAIT_S):
            await self._proc.stderr_eof.wait()
        self.stderr_eof.set()

    async def _ping(self) -> None:
        """Say we are there, so the relay can tell a link cut without a word (see the attach step)."""
        while True:
            await anyio.sleep(PING_S)
            if self._phase is Phase.LIVE and not self._finishing:
                await self._write(b"P\n")

    def _run(self, proc: AgentProcess) -> None:
        assert self._tg is not None
        self._tg.start_soon(proc.drain_stderr)
        self._tg.start_soon(proc.watch_exit)

    def _on_end_line(self, line: bytes) -> None:
        if self._end is None and (end := parse_end(line)) is not None:
            self._end = end
            self._maybe_finish()

    async def read_stdout(self) -> bytes:
        while True:
            if self._phase is Phase.DONE:
                return b""
            if self._pushback:
                data, self._pushback = self._pushback, b""
            else:
                data = await self._proc.read_stdout()
            if self._phase is Phase.PRELUDE:
                if not data:
                    await self._finish(self._proc)  # the start failed: the ssh's status is ours
                    return b""
                step = self._marker.feed(data)
                if isinstance(step, Ready):
                    self._phase, self._raw_left, self._pushback = Phase.HEADER, len(self.relink.go_ahead), step.rest
                    return data[: len(data) - len(step.rest)]
                return data
            if not data:
                if await self._connection_ended():
                    return b""
                continue
            if self._phase is Phase.HEADER:
                rest = await self._take_header(data)
                if rest is None:
                    continue
                if self.exited.is_set():  # refused
                    return b""
                data = rest
            fresh = self._link.received_bytes(data) if data else b""
            if fresh:
                newline = fresh.rfind(b"\n")
                if newline >= 0:
                    self._line_end = self._link.received - (len(fresh) - newline - 1)
                    self._ack_soon()
                self._maybe_finish()
                return fresh
            self._maybe_finish()

    def _ack_soon(self) -> None:
        """Acknowledge up to the last whole line, every :data:`ACK_BYTES` or :data:`ACK_S`: what
        a controller taking over after this one died sees again is at most that much."""
        now = time.monotonic()
        due = self._line_end - self._link.acked >= ACK_BYTES or now - self._acked_at >= ACK_S
        if due and self._tg is not None and (ack := self._link.ack(upto=self._line_end, force=True)):
            self._acked_at = now
            self._tg.start_soon(self._write, ack)

    async def _take_header(self, data: bytes) -> bytes | None:
        """Collect the header line; the bytes after it, or ``None`` while it is incomplete."""
        self._header += data
        newline = self._header.find(b"\n")
        if newline < 0:
            if len(self._header) > HEADER_MAX:
                await self._fail(self._proc, protocol_error("the host sent no relay header"))
                return b""
            return None
        line, rest = bytes(self._header[:newline]), bytes(self._header[newline + 1 :])
        self._header.clear()
        try:
            reply = parse_attach_reply(line)
        except ValueError:
            if line.startswith(REFUSED_MARK.encode()):
                await self._fail(self._proc, await refusal(self._proc, line, self.relink, start=not self._resume))
            else:
                await self._fail(self._proc, protocol_error(f"the host's relay answered {host_text(line)}"))
            return b""
        async with self._lock:
            try:
                if self._resume:
                    self._link.resumed(reply)
                    frames = b""
                    self._resume = False
                else:
                    frames = self._link.attached(reply)
            except RemoteAcpError as exc:
                await self._fail(self._proc, exc)
                return b""
            self._line_end = self._link.received
            self._phase = Phase.LIVE
            self.linked.set()
            if self._ending_sent:
                frames += Link.end_session()
            await self._write_locked(frames)
        return rest

    async def _connection_ended(self) -> bool:
        """This ssh's output ended: the session's end (``True``), or a lost link, reattached
        (``False``) or not (``True``)."""
        proc = self._proc
        if self._end is not None and self._link.received >= self._end[0]:
            await self._finish(proc)
            return True
        if self._closing or self._phase is Phase.DONE:
            await self._finish(proc)
            return True
        if self._phase is Phase.HEADER and not self._link.received and not self.reattached:
            # The first connection ended before the relay answered: a start that failed.
            await self._finish(proc)
            return True
        with anyio.move_on_after(0.2):  # its status says why, when it has one
            await proc.exited.wait()
        why = proc.exit_status.describe() if proc.exit_status is not None else "no status yet"
        return not await self._reattach(f"the ssh connection ended: {why}")

    def _maybe_finish(self) -> None:
        """All the output is in: acknowledge it and close the connection (the relay then ends)."""
        end = self._end
        if end is None or self._finishing or self._link.received < end[0] or self._tg is None:
            return
        self._finishing = True
        self._tg.start_soon(self._close_link, self._link.ack(force=True))

    async def _close_link(self, ack: bytes) -> None:
        await self._write(ack)
        self._proc.close_stdin()

    async def _finish(self, proc: AgentProcess) -> None:
        """The session's end: wait (bounded) for the ssh's status, and take it or the relay's."""
        with anyio.move_on_after(END_WAIT_S):
            await proc.exited.wait()
        if self._end is not None and self._link.received >= self._end[0]:
            # the relay's shell reports an agent killed by signal N as 128+N, as the session
            # script does: the remote rules read it (remote_acp.session.exits)
            self.exit_status = ExitStatus(self._end[1])
        else:
            self.exit_status = proc.exit_status
        self._phase = Phase.DONE
        self.exited.set()
        self.linked.set()

    async def _fail(self, proc: AgentProcess, error: RemoteAcpError) -> None:
        self._lost = error
        proc.close_stdin()
        await self._finish(proc)

    async def _reattach(self, reason: str) -> bool:
        """Reconnect within the window; ``False`` when the session cannot go on (why: :attr:`lost_error`).
        Attempts overlap (:func:`~.relink.next_attempt_in`): one hanging in a connect the cut link
        dropped does not hold back a fresh one; the first through its login attaches."""
        old = self._proc
        self._phase = Phase.DOWN
        self._link.detached()
        old.close_stdin()  # a write blocked on the dead link fails now, and lets go of the lock
        down_at = time.monotonic()
        deadline = down_at + self.relink.window_s
        log.warning("the link to the session's host was lost", extra={"host": self.relink.host, "reason": reason})
        if self.watcher is not None:
            self.watcher.link_lost(reason)
        await retire(old)
        pending: list[anyio.CancelScope] = []
        with anyio.CancelScope() as self._reconnecting:
            async with anyio.create_task_group() as attempts:
                # HEADER: an attempt is through its login and waits for the relay's answer (which
                # may first end a stale attachment): no new one meanwhile; only the window ends it.
                while not self._closing and self._phase in (Phase.DOWN, Phase.HEADER):
                    now = time.monotonic()
                    if now >= deadline:
                        break
                    if self._phase is Phase.DOWN:
                        if len(pending) >= MAX_ATTEMPTS:
                            pending.pop(0).cancel()  # the oldest hangs longest: a fresh one gets through first
                        bound = min(deadline - now, self.relink.attempt_s)
                        scope = anyio.CancelScope(deadline=anyio.current_time() + bound)
                        pending.append(scope)
                        attempts.start_soon(self._attempt, scope)
                    with anyio.move_on_after(min(next_attempt_in(now - down_at), deadline - now)):
                        await self._settled.wait()
                    self._settled = anyio.Event()
                attempts.cancel_scope.cancel()
        self._reconnecting = None
        if self._phase is not Phase.LIVE:
            if self._phase is not Phase.DONE:
                self._lost = self._lost or window_over(self.relink, closing=self._closing)
                await self._finish(self._proc)
            return False
        self.reattached += 1
        down_ms = round((time.monotonic() - down_at) * 1000)
        log.info("the link to the session's host is back", extra={"host": self.relink.host, "down_ms": down_ms})
        if self.watcher is not None:
            self.watcher.link_restored(down_ms)
        return True

    async def _attempt(self, scope: anyio.CancelScope) -> None:
        """A new ssh and its login; then, for the first through, the request and the header.
        The phase says how it went: ``LIVE``, ``DONE`` (refused for good), ``DOWN`` (try again)."""
        await self._tg_ready.wait()
        try:
            proc = await AgentProcess.start(self.relink.spec, stderr_tail_bytes=self._tail_bytes)
        except RemoteAcpError as exc:  # ssh itself cannot be started any more: no retry helps
            await self._fail(self._proc, exc)
            self._settled.set()
            return
        self._procs.append(proc)
        self._run(proc)
        rest = None
        try:
            with scope:  # ended early when newer attempts crowd it out, or at its bound
                rest = await login(proc, self.relink.spec)
            if rest is not None:
                async with self._gate:  # past its login, an attempt is no longer crowded out
                    if self._phase is Phase.DOWN:
                        with anyio.move_on_after(self.relink.attempt_s):
                            await self._attach(proc, rest)
                        if self.phase is Phase.HEADER:  # the relay never answered
                            self._phase = Phase.DOWN
        finally:
            if proc is not self._proc or self._phase is not Phase.LIVE:
                await retire(proc)
            if rest is not None or self._phase is not Phase.DOWN:  # a failed login waits for the schedule
                self._settled.set()

    async def _attach(self, proc: AgentProcess, data: bytes) -> None:
        """The request and the header, on the connection that got through first."""
        self._proc = proc
        proc.stderr_tail.watch_lines(END_MARK.encode(), self._on_end_line)
        try:
            await proc.write_stdin(self.relink.go_ahead + self._link.attach_request(takeover=True))
        except PipeClosed:
            return
        self._phase = Phase.HEADER
        while True:
            if data:
                after = await self._take_header(data)
                if after is not None:
                    self._pushback = after
                    return
            data = await proc.read_stdout()
            if not data:
                self._phase = Phase.DOWN
                return

    async def write_stdin(self, data: bytes) -> None:
        if self._raw_left:
            await self._write_raw(data)
            return
        async with self._lock:
            try:
                frame = self._link.send(data)
            except RuntimeError:
                raise PipeClosed("the agent's input is closed") from None
            if self._phase is Phase.LIVE:
                await self._write_locked(frame)
            elif self._phase is Phase.DONE:
                raise PipeClosed("the session ended")
            # else: kept by the link, and sent once a connection attaches

    async def _write_raw(self, data: bytes) -> None:
        """The first connection's bytes before the protocol: the session script, then the
        go-ahead, which the request follows (it is written as one write, as the connection does)."""
        if self._raw_left < 0:  # before the marker: the opening
            await self._proc.write_stdin(data)
            return
        go_ahead = self.relink.go_ahead
        if not data.startswith(go_ahead):
            raise PipeClosed("the protocol began before the relay's go-ahead")
        self._raw_left = 0
        await self._proc.write_stdin(go_ahead + self._request)
        if len(data) > len(go_ahead):
            await self.write_stdin(data[len(go_ahead) :])

    async def _write(self, frame: bytes) -> None:
        async with self._lock:
            if self._phase is Phase.LIVE:
                await self._write_locked(frame)

    async def _write_locked(self, frame: bytes) -> None:
        if not frame:
            return
        try:
            await self._proc.write_stdin(frame)
        except PipeClosed:
            pass  # the link is gone: what was sent is kept and resent from what the host has

    def close_stdin(self) -> None:
        if self._raw_left:  # the protocol never started: nothing to close on the host
            self._proc.close_stdin()
            return
        try:
            frame = self._link.close_input()
        except RuntimeError:
            return
        if self._tg is not None and self._phase is Phase.LIVE:
            self._tg.start_soon(self._write, frame)

    def close_stdout(self) -> None:
        self._closing = True
        self._proc.close_stdout()

    async def terminate(self) -> None:
        """End the session on the host: its relay ends the agent's tree (``X``), and the rest of
        the output still comes; before the relay answered, the ssh is ended instead."""
        self._closing = True
        if self._phase is Phase.PRELUDE or self._phase is Phase.HEADER:
            await self._proc.terminate()
            return
        if not self._ending_sent:
            self._ending_sent = True
            await self._write(Link.end_session())

    async def kill(self, bound_s: float = 1.0) -> None:
        """End the current ssh: the session is over for this controller (an ``X`` sent before
        has the host end the agent; without one it waits out its window)."""
        self._closing = True
        if self._reconnecting is not None:
            self._reconnecting.cancel()
        await self._proc.kill(bound_s=bound_s)
        with anyio.move_on_after(bound_s):
            await self.exited.wait()
        if not self.exited.is_set():
            await self._finish(self._proc)

    def signal_group(self, sig: int) -> None:
        self._proc.signal_group(sig)

    async def kill_pipe_holders_off_loop(self) -> None:
        await self._proc.kill_pipe_holders_off_loop()

    def reap(self) -> ExitStatus | None:
        for proc in self._procs:
            proc.reap()
        return self.exit_status

    def release(self) -> None:
        for proc in self._procs:
            proc.release()
