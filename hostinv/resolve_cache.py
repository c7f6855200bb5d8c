"""``ssh -G``'s answers kept on disk, each valid only while what ssh read to give it is unchanged.

A probe asks ``ssh -G`` what ``ssh`` would use for a host (:mod:`hostinv.sshopts`), and a
session over ssh asks it which host key policy the user's config sets: about 10 ms of CPU each,
nearly all of it ssh's own start, so half a second for fifty hosts and ten for a thousand, every
check. The answer (``ssh -G``'s output, kept as it printed it) depends only on the command line,
the files ssh read, the variables they name, who and where we are, and ssh itself. So it is
kept, and reused while:

- the command line, the ssh binary (path, size, modification time), the user id, ``$HOME``, the
  working directory and the host name (``%l``) are the same (they make the entry's name);
- every configuration file ssh said it read (``ssh -G -v``: "Reading configuration data") has the
  same contents (SHA-256), and the files ssh would have read had they existed (``~/.ssh/config``
  and the system file, or the ``-F`` file) are still absent;
- every directory an ``Include`` names lists the same names (a file added or removed), and every
  variable a file names (``${NAME}``) has the same value.

A configuration whose answer can change without any of that changing is never kept: ``Match exec``
(runs a command), ``Match localnetwork``, ``Match canonical``/``final`` and canonicalization (they
depend on DNS: an answer whose ``canonicalizehostname`` is not ``false``, however the file spelled
it, ``yes``, ``true``, ``"always"`` or on the command line), and an ``Include`` whose directory part
has a pattern, a token or a variable. A file of our own making given to ``-F`` (its name is its
contents' digest, see :func:`hostinv.sshopts.fallback_config_text`) is checked by its contents only:
the files it includes are the candidates already. Nothing here connects anywhere; only
:func:`lookup` and :func:`store` touch the disk, and any error there is a miss, never a failure.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
import shutil
import socket
import time
from typing import TYPE_CHECKING, Any, Final

from .keep import ABSENT, digest, read_entry, write_whole
from .sshopts import SYSTEM_CONFIG, included_files, login_home

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "SYSTEM_CONFIG",
    "Reading",
    "config_files_read",
    "default_files",
    "entry_name",
    "lookup",
    "reading",
    "store",
    "store_answer",
    "verbose",
    "which_ssh",
]

_VERSION: Final = 3
"""3: answers kept by 2 may depend on DNS (canonicalization spelled ``true`` or quoted)."""
_READ_LINE: Final = re.compile(r"^debug\d: Reading configuration data (.+)$", re.MULTILINE)
_INCLUDE: Final = re.compile(r"^\s*include\s*[=\s]\s*(.+)$", re.IGNORECASE | re.MULTILINE)
_DYNAMIC_MATCH: Final = re.compile(
    r"^\s*match\b.*\b(exec|localnetwork|canonical|final)\b", re.IGNORECASE | re.MULTILINE
)
_CANONICALIZE: Final = re.compile(
    r"^\s*canonicalizehostname\s*(=\s*|\s+)[\"']?\s*(yes|true|always)\b", re.IGNORECASE | re.MULTILINE
)
_ANSWER_CANONICALIZES: Final = re.compile(r"^canonicalizehostname (?!false$)\S", re.MULTILINE)
_VARIABLE: Final = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_GLOB: Final = frozenset("*?[%$")
_RACY_NS: Final = 2_000_000_000
"""How close to the run a modification makes a file suspect (coarse file system clocks)."""


def verbose(argv: Sequence[str]) -> list[str]:
    """``argv`` (``ssh -G ...``) with ``-v``, so that ssh names the files it reads on stderr."""
    return [argv[0], "-v", *argv[1:]]


def default_files(config: str | None, home: str) -> list[str]:
    """The files ssh looks for whether or not they exist: ``-F``'s (none for ``-F none``), else
    the user's and the system's (:func:`hostinv.sshopts.included_files`)."""
    return included_files(config, home=home)


def config_files_read(stderr: str) -> list[str]:
    """The configuration files ``ssh -G -v`` says it read, in order."""
    return [path.strip() for path in _READ_LINE.findall(stderr)]


class Reading:
    """What an answer depends on beyond its name: the files read, the directories their
    ``Include`` lines name, the variables they use; ``why_not`` says why it cannot be kept."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}  # path -> sha256 of the contents, or ABSENT
        self.directories: dict[str, str] = {}  # path -> sha256 of its sorted names, or ABSENT
        self.variables: dict[str, str | None] = {}
        self.why_not: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"files": self.files, "directories": self.directories, "variables": self.variables}


def _listing(path: str) -> str:
    try:
        names = sorted(os.listdir(path))
    except (FileNotFoundError, NotADirectoryError):
        return ABSENT
    return hashlib.sha256("\0".join(names).encode("utf-8", "surrogateescape")).hexdigest()


def reading(
    read: Sequence[str],
    candidates: Iterable[str],
    *,
    home: str,
    environ: Mapping[str, str],
    since_ns: int,
    ours: str | None = None,
) -> Reading:
    """The :class:`Reading` of one ``ssh -G`` run, started at ``since_ns`` (``time.time_ns()``),
    that read ``read`` (see :func:`config_files_read`); ``candidates``: the files it looks for
    first whether or not they exist (``-F``'s file, or the user's and the system's).

    A file or directory modified since shortly before the run may have changed between ssh's
    reading and ours: the answer is then not kept (the next run keeps it). ``ours``: a file we
    wrote whose name is its contents' digest, given to ``-F``; its contents are kept, not its
    age or its Include lines (they name the candidates)."""
    found = Reading()
    read_now = set(read)
    for path in (*candidates, *read):
        if path in found.files:
            continue
        if path == ours:
            try:
                found.files[path] = digest(path)
            except OSError as exc:
                found.why_not = f"{path}: {exc.strerror}"
                return found
            continue
        try:
            with open(path, "rb") as file:
                if os.fstat(file.fileno()).st_mtime_ns >= since_ns - _RACY_NS:
                    found.why_not = f"{path} changed while ssh read it"
                    return found
                data = file.read()
        except FileNotFoundError:
            if path in read_now:  # ssh read it a moment ago: it went meanwhile
                found.why_not = f"{path} went while ssh read it"
                return found
            found.files[path] = ABSENT
            continue
        except OSError as exc:
            found.why_not = f"{path}: {exc.strerror}"
            return found
        found.files[path] = hashlib.sha256(data).hexdigest()
        text = data.decode("utf-8", "replace")
        if _DYNAMIC_MATCH.search(text) or _CANONICALIZE.search(text):
            found.why_not = f"{path} has a Match or canonicalization that depends on more than its text"
            return found
        for name in _VARIABLE.findall(text):
            found.variables[name] = environ.get(name)
        for line in _INCLUDE.findall(text):
            directories = _include_dirs(line, home)
            if directories is None:
                found.why_not = f"{path} has an Include whose directory is a pattern or cannot be read: {line}"
                return found
            for directory in directories:
                try:
                    if os.stat(directory).st_mtime_ns >= since_ns - _RACY_NS:
                        found.why_not = f"{directory} changed while ssh read it"
                        return found
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    found.why_not = f"{directory}: {exc.strerror}"
                    return found
                try:
                    found.directories[directory] = _listing(directory)
                except OSError as exc:
                    found.why_not = f"{directory}: {exc.strerror}"
                    return found
    return found


def _include_dirs(line: str, home: str) -> list[str] | None:
    """The directories an ``Include`` line's patterns look in; ``None`` when one cannot be told
    (a pattern, a token or a variable in a directory part, quoting ssh would read otherwise)."""
    try:
        patterns = shlex.split(line)
    except ValueError:
        return None
    directories: list[str] = []
    for pattern in patterns:
        if pattern.startswith("~/"):
            pattern = home + pattern[1:]
        directory = os.path.dirname(pattern)
        if _GLOB & set(directory) or "\\" in directory:
            return None
        if directory.startswith("/"):
            directories.append(os.path.normpath(directory))
        else:  # relative: under ~/.ssh from a user's file, /etc/ssh from the system's
            directories += [os.path.normpath(os.path.join(base, directory)) for base in (f"{home}/.ssh", "/etc/ssh")]
    return directories


_WHICH_FOR_S: Final = 1.0
_which: dict[str | None, tuple[float, str]] = {}


def which_ssh(environ: Mapping[str, str]) -> str:
    """The ``ssh`` that ``environ``'s PATH finds (``"ssh"`` when none), remembered for a second:
    a fleet's probes resolve their hosts together, and each PATH search stats every directory."""
    path, now = environ.get("PATH"), time.monotonic()
    found = _which.get(path)
    if found is None or now - found[0] > _WHICH_FOR_S:
        found = (now, shutil.which("ssh", path=path) or "ssh")
        _which[path] = found
    return found[1]


def entry_name(argv: Sequence[str], ssh: str, *, environ: Mapping[str, str]) -> str:
    """The name of the entry for ``ssh -G`` run as ``argv`` by the ssh at ``ssh``."""
    try:
        stat = os.stat(ssh)
        binary: list[object] = [os.path.realpath(ssh), stat.st_size, stat.st_mtime_ns]
    except OSError:
        binary = [ssh]
    try:
        cwd = os.getcwd()  # relative paths in the config (and on the command line) resolve against it
    except OSError:
        cwd = ""
    inputs = [_VERSION, list(argv), binary, os.getuid(), environ.get("HOME"), cwd, socket.gethostname()]
    return hashlib.sha256(json.dumps(inputs).encode()).hexdigest()[:40]


def lookup(directory: str, name: str, environ: Mapping[str, str]) -> str | None:
    """The kept answer (``ssh -G``'s output) named ``name``, if what it depends on is unchanged;
    else ``None``."""
    entry = read_entry(directory, name, _VERSION)
    if entry is None:
        return None
    try:
        if any(_listing(path) != names for path, names in entry["directories"].items()):
            return None
        if any(environ.get(var) != value for var, value in entry["variables"].items()):
            return None
        answer = entry["answer"]
        return answer if isinstance(answer, str) and not _ANSWER_CANONICALIZES.search(answer) else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def store_answer(
    directory: str,
    name: str,
    answer: str,
    *,
    stderr: str,
    config: str | None,
    environ: Mapping[str, str],
    since_ns: int,
    ours: str | None = None,
) -> None:
    """Keep ``answer``, the output of ``ssh -G -v`` run with ``-F config`` (``None``: ssh's own
    files) that started at ``since_ns`` and said ``stderr``, if what it read allows (see
    :func:`reading` and :func:`store`). ``ours``: the file given to ``-F`` in place of
    ``config`` when it is one we wrote to include it (see :func:`reading`). An answer for a
    name ssh canonicalizes is never kept, however the configuration or the command line said so."""
    if _ANSWER_CANONICALIZES.search(answer):
        return
    home = login_home()
    found = reading(
        config_files_read(stderr),
        default_files(config, home),
        home=home,
        environ=environ,
        since_ns=since_ns,
        ours=ours,
    )
    store(directory, name, found, answer)


def store(directory: str, name: str, found: Reading, answer: str) -> None:
    """Keep ``answer`` (``ssh -G``'s output) under ``name`` (atomically), unless ``found`` says it
    cannot be kept. A directory that cannot be written only costs the reuse."""
    if found.why_not is not None:
        return
    entry = {"version": _VERSION, **found.as_json(), "answer": answer}
    with contextlib.suppress(OSError):
        os.makedirs(directory, mode=0o700, exist_ok=True)
        write_whole(os.path.join(directory, name + ".json"), json.dumps(entry).encode(), prefix=".ssh-g-")
