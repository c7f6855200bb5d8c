"""Throwaway local users for the ssh tests: a login shell and dotfiles of a test's choosing.

:func:`throwaway_user` creates a user named ``ra-<hex>`` with the given login shell and a home
under a directory of its own (never under a real home), puts the lab's client public key in
``~/.ssh/authorized_keys`` and writes the dotfiles it is given, all owned by the user with the
modes sshd's ``StrictModes`` accepts. On exit it kills the user's processes (by pid, found through
``/proc``: only that uid's), deletes the user and its group, and removes the home. The machine's
own accounts and dotfiles are never touched. It needs root, as the test command has.

The lab's hosts (:mod:`integration.sshlab`) read ``.ssh/authorized_keys`` in the user's home
beside the lab's own key file, and run without PAM, so the account gets the password ``*``
(no password, but not "locked": sshd without PAM refuses a locked account, which useradd's
``!`` would be).
"""

from __future__ import annotations

import atexit
import compileall
import contextlib
import functools
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.processes import processes, status

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

__all__ = [
    "SHELLS",
    "User",
    "agent_pythonpath",
    "closed_to_others",
    "for_others",
    "login_shell",
    "throwaway_user",
    "uid_processes",
]

# The shells the suite drives, and where Debian's packages put them. BusyBox's ash is reached
# through a link named ``ash``: busybox picks the applet from argv[0], which sshd sets to the
# last part of the shell's path.
SHELLS = {
    "sh": "/bin/sh",
    "dash": "/bin/dash",
    "bash": "/bin/bash",
    "zsh": "/bin/zsh",
    "ksh": "/bin/ksh",
    "fish": "/usr/bin/fish",
    "csh": "/bin/csh",
    "tcsh": "/bin/tcsh",
    "ash": "/bin/busybox",
}


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int
    home: Path
    shell: str

    def destination(self, alias: str) -> str:
        """An ssh destination for this user on a lab host (``name@alias``)."""
        return f"{self.name}@{alias}"

    def write(self, relative: str, content: str | bytes, mode: int = 0o644) -> Path:
        """Write a file under the home (parents created), owned by the user."""
        path = self.home / relative
        self.makedirs(path.parent)
        data = content.encode() if isinstance(content, str) else content
        path.write_bytes(data)
        os.chown(path, self.uid, self.gid)
        path.chmod(mode)
        return path

    def makedirs(self, path: Path, mode: int = 0o755) -> Path:
        """Create ``path`` and any missing parents under the home, owned by the user."""
        missing = []
        at = path
        while at != self.home and not at.exists():
            missing.append(at)
            at = at.parent
        for directory in reversed(missing):
            directory.mkdir(mode=mode)
            os.chown(directory, self.uid, self.gid)
        return path


def login_shell(name: str, base: Path) -> str:
    """The path to use as a login shell for ``name`` (a key of ``SHELLS``); for ``ash`` a link
    named ``ash`` to busybox, made under ``base`` (which must be traversable by every user)."""
    path = SHELLS[name]
    if name != "ash":
        return path
    link = base / "bin" / "ash"
    if not link.exists():
        link.parent.mkdir(mode=0o755, exist_ok=True)
        link.symlink_to(path)
    return str(link)


@contextlib.contextmanager
def throwaway_user(
    public_key: Path,
    *,
    shell: str = "/bin/sh",
    dotfiles: Mapping[str, str | bytes] | None = None,
    base: Path | None = None,
) -> Iterator[User]:
    """A local user that exists for the ``with`` block only (see the module docstring).

    ``shell``: the login shell's path (:func:`login_shell` for the usual ones). ``dotfiles``:
    ``{path relative to the home: content}``. ``base``: where the home goes (default: a fresh
    directory in the system's temporary directory); every directory above the home must be
    traversable by the user, which a pytest ``tmp_path`` (mode 0700, root's) is not.
    """
    own_base = base is None
    if base is None:
        base = Path(tempfile.mkdtemp(prefix="ra-homes-"))
        base.chmod(0o755)
    name = f"ra-{secrets.token_hex(4)}"
    home = base / name
    created = False
    try:
        _locked_run(["useradd", "--no-create-home", "--home-dir", str(home), "--shell", shell, "--user-group", name])
        created = True
        _locked_run(["usermod", "--password", "*", name])
        entry = pwd.getpwnam(name)
        user = User(name, entry.pw_uid, entry.pw_gid, home, shell)
        home.mkdir(mode=0o755)
        os.chown(home, user.uid, user.gid)
        ssh_dir = home / ".ssh"
        user.makedirs(ssh_dir, mode=0o700)
        user.write(".ssh/authorized_keys", public_key.read_bytes(), mode=0o600)
        for relative, content in (dotfiles or {}).items():
            user.write(relative, content)
        yield user
    finally:
        if created:
            _kill_user_processes(name)
            _locked_run(["userdel", name], check=False)
        shutil.rmtree(home, ignore_errors=True)
        if own_base:
            shutil.rmtree(base, ignore_errors=True)


def _locked_run(argv: list[str], *, check: bool = True) -> None:
    """Run a shadow-utils command, retrying while another holds the password file's lock
    (parallel tests add and remove users at once)."""
    deadline = time.monotonic() + 30
    while True:
        done = subprocess.run(argv, capture_output=True, check=False)
        if done.returncode == 0:
            return
        busy = b"lock" in done.stderr.lower() or b"try again" in done.stderr.lower()
        if busy and time.monotonic() < deadline:
            time.sleep(0.1)
            continue
        if check:
            raise RuntimeError(f"{argv[0]} failed ({done.returncode}): {done.stderr.decode(errors='replace')}")
        return


def uid_processes(uid: int) -> list[int]:
    """The live (not zombie) processes running as ``uid`` (their real or effective user); a dead
    one is left to its parent to reap (init here may be slow to)."""
    return processes(lambda pid: str(uid) in status(pid).get("Uid", "").split()[:2])


def _kill_user_processes(name: str) -> None:
    """SIGKILL every process running as the user, until none is left (a fork races the scan)."""
    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        return
    deadline = time.monotonic() + 10
    while pids := uid_processes(uid):
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            return
        time.sleep(0.02)


@functools.cache
def agent_pythonpath() -> Path:
    """A directory every user can read holding a copy of this checkout's packages (``remote_acp``
    and ``hostinv``, which it imports; compiled), for ``PYTHONPATH`` when a throwaway user runs the
    scripted agent: the checkout itself may sit where they cannot reach (a clone under a 0700
    directory, root's home). Made once per test process, removed when it exits."""
    base = _shared_dir("ra-agentpath-")
    for package in ("remote_acp", "hostinv"):
        shutil.copytree(CHECKOUT / package, base / package, ignore=shutil.ignore_patterns("__pycache__"))
    compileall.compile_dir(base, quiet=1)  # the agent's interpreter may not write bytecode there
    _open_to_all(base)
    return base


CHECKOUT = Path(__file__).resolve().parents[1]


def for_others(path: Path, tree: Path) -> Path:
    """``path`` (inside the directory ``tree``) as every user can reach it: itself when no
    directory above ``tree`` is closed to others; otherwise the same path in a copy of ``tree``
    made once per test process in a world-readable directory (files hard-linked where the file
    system allows, so a large runtime costs no space), removed when the process exits."""
    if closed_to_others(tree) is None:
        return path
    return _shared_copy(tree.resolve()) / path.absolute().relative_to(tree.absolute())


@functools.cache
def _shared_copy(tree: Path) -> Path:
    base = _shared_dir("ra-shared-")
    copy = base / tree.name

    def link_or_copy(source: str, destination: str) -> object:
        try:
            os.link(source, destination)
        except OSError:  # another file system, or links refused: a copy
            shutil.copy2(source, destination)
        return destination

    shutil.copytree(tree, copy, symlinks=True, copy_function=link_or_copy)
    _open_to_all(copy)
    return copy


def _shared_dir(prefix: str) -> Path:
    base = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, base, ignore_errors=True)
    base.chmod(0o755)
    return base


def _open_to_all(root: Path) -> None:
    """Directories traversable and files readable by every user (executables stay executable)."""
    for directory, _subdirs, files in os.walk(root):
        os.chmod(directory, 0o755)
        for name in files:
            path = os.path.join(directory, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | 0o444)


def closed_to_others(path: Path) -> Path | None:
    """The first directory above ``path`` that other users cannot traverse (no ``o+x``), which
    keeps a throwaway user from running what lies below it; ``None`` when every one is open."""
    for directory in reversed(path.absolute().parents):
        if not directory.stat().st_mode & 0o001:
            return directory
    return None
