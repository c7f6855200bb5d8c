"""CPU time by control group: the controller's processes and the lab hosts' counted apart.

Every lab host is this machine, and the process trees cross: a login shell whose sshd ended first
is re-parented to the benchmark process (a child subreaper), and the supervisor launcher lets the
kernel reap its supervisors (``SIGCHLD`` ignored), whose CPU time, and that of the ``ssh`` clients
they reaped, then reaches no ``wait``: no parent's children's time and no ``/proc`` entry holds
it. Summing ``/proc`` or ``RUSAGE_CHILDREN`` over the process tree therefore counts some of the
hosts' work as the controller's and loses some of the controller's own.

A control group counts what ran in it, whoever reaps it: a process stays in the group it was
forked in, re-parented or not. The benchmark puts each sshd listener in a ``hosts`` group (every
login, shell, agent and probe forked there stays there) and the controller in a ``controller``
group (this process, or a contender's process as it starts: :meth:`CpuGroup.join_at_exec`), and
reads each group's CPU time before and after a run.

cgroup v2 (``cpu.stat``'s ``usage_usec``) where its hierarchy is mounted and writable, else v1's
``cpuacct`` controller (``cpuacct.usage``). Needs root, as the labs do.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = ["CpuGroup", "cpu_groups"]


class CpuGroup:
    """One control group the benchmark made: processes join it, its CPU time is read."""

    def __init__(self, path: Path, home: Path, v2: bool) -> None:
        self.path, self.home, self.v2 = path, home, v2

    def add(self, pid: int) -> None:
        """Move ``pid`` (the whole process) into the group: its children are forked there."""
        (self.path / "cgroup.procs").write_text(f"{pid}\n")

    def join_at_exec(self) -> Callable[[], None]:
        """A ``preexec_fn`` putting the new process into the group before it runs anything."""
        procs = os.fsencode(self.path / "cgroup.procs")

        def join() -> None:
            fd = os.open(procs, os.O_WRONLY)
            try:
                os.write(fd, b"0\n")  # 0: the writing process
            finally:
                os.close(fd)

        return join

    def usage_s(self) -> float:
        """CPU seconds of every process that has run in the group since it was made."""
        if self.v2:
            for line in (self.path / "cpu.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "usage_usec":
                    return int(value) / 1e6
            raise RuntimeError(f"{self.path}/cpu.stat has no usage_usec")
        return int((self.path / "cpuacct.usage").read_text()) / 1e9

    def remove(self) -> None:
        """Move what is left back where this process came from, and remove the group."""
        for _ in range(100):
            with contextlib.suppress(OSError):
                for pid in (self.path / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        (self.home / "cgroup.procs").write_text(f"{pid}\n")
            try:
                self.path.rmdir()
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)  # a process just exiting still holds it for a moment
            else:
                return


def _hierarchies() -> Iterator[tuple[Path, Path, bool]]:
    """(mount point, this process's group there, v2) of the hierarchies that can count CPU:
    cgroup v2 first, then v1's ``cpuacct``."""
    own: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                own[name] = path
    mounts: list[tuple[Path, Path, bool]] = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            fields = line.split()
            after = fields.index("-")
            fstype, options = fields[after + 1], fields[after + 3].split(",")
            point = Path(fields[4])
            if fstype == "cgroup2" and "" in own:
                mounts.insert(0, (point, point / own[""].lstrip("/"), True))
            elif fstype == "cgroup" and "cpuacct" in options:
                key = next((k for k in own if "cpuacct" in k.split(",")), "cpuacct")
                mounts.append((point, point / own.get(key, "/").lstrip("/"), False))
    yield from mounts


@contextlib.contextmanager
def cpu_groups(*names: str) -> Iterator[dict[str, CpuGroup] | None]:
    """One new group per name (under the hierarchy's root, so that no controller of a parent
    group refuses processes), removed on exit; ``None`` where none can be made (not root, no
    cgroup file system)."""
    made: dict[str, CpuGroup] = {}
    try:
        for mount, home, v2 in _hierarchies():
            try:
                for name in names:
                    path = mount / f"ra-bench-{os.getpid()}-{name}"
                    path.mkdir()
                    made[name] = CpuGroup(path, home if home.is_dir() else mount, v2)
                    made[name].usage_s()
            except (OSError, RuntimeError, ValueError):
                for group in made.values():
                    group.remove()
                made.clear()
                continue
            break
        yield made or None
    finally:
        for group in made.values():
            group.remove()
