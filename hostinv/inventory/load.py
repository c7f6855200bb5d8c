"""Where the inventory's files are, and reading them (the only module here that touches files).

Our own file is ``--inventory FILE``, else ``$REMOTE_ACP_INVENTORY``, else ``inventory.yaml``
under the user config directory (``~/.config/remote-acp/`` on Linux). A file named explicitly
must exist; the default one may be missing (no hosts of ours yet). The ssh_config is
``--ssh-config FILE`` (must exist), else ``~/.ssh/config`` when there is one. Relative
``Include`` paths are taken against ``~/.ssh``, as ssh does for a user's config.

Every file read must hold only what this user or root wrote (:func:`hostinv.keep.untrusted_file`:
its owner, its mode, the directories above it), as ssh insists for a user's config: an
inventory's ssh options steer what runs as this user.

A source's parser is imported when that source is read: without our file or an Ansible
inventory, neither YAML nor their parsers and models are loaded. Given a directory to keep it
in, the merged view is kept there and reused while nothing it was read from changed
(:mod:`.cache`): then no parser, YAML or pydantic is loaded at all.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ..errors import InventoryUnreadable
from ..keep import untrusted_file, write_whole
from . import cache
from .merge import merge

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

    from ..models import Inventory
    from .cache import Reads
    from .ssh_config import IncludeReader

    StrPath = str | os.PathLike[str]

__all__ = [
    "INVENTORY_ENV",
    "default_inventory_path",
    "load_ansible",
    "load_inventory",
    "load_ssh_config",
    "read_text",
    "write_text",
]

INVENTORY_ENV: Final = "REMOTE_ACP_INVENTORY"


def default_inventory_path(environ: Mapping[str, str] | None = None) -> tuple[Path, bool]:
    """Our inventory file, and whether someone named it (``$REMOTE_ACP_INVENTORY``) so it must exist."""
    override = (os.environ if environ is None else environ).get(INVENTORY_ENV)
    if override:
        return Path(override).expanduser(), True
    import platformdirs  # here: a named file needs none of it (its import is most of a load's)

    return platformdirs.user_config_path("remote-acp") / "inventory.yaml", False


MAX_INVENTORY_BYTES: Final = 16 * 2**20
"""The largest inventory file read: far above any fleet's (10,000 hosts with their variables fit
in a few MiB), far below what would strain the machine."""


def read_text(path: StrPath, reads: Reads | None = None) -> str:
    """The file's text (UTF-8, newlines as ``\\n``); ``reads`` notes what was read.

    :raises InventoryUnreadable: missing, a directory, not a regular file (a FIFO, a device:
        reading one could block or never end), larger than :data:`MAX_INVENTORY_BYTES`, no
        permission, not UTF-8; or another user could have written it
        (:func:`~hostinv.keep.untrusted_file`).
    """
    path = Path(path)
    try:
        # Non-blocking: opening a FIFO would otherwise wait for a writer before the check below.
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as file:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise InventoryUnreadable(str(path), "not a regular file")
            why = untrusted_file(path, info)  # the file opened, so it cannot be swapped after the check
            if why is not None:
                raise InventoryUnreadable(str(path), f"refused, as ssh refuses such a config: {why}")
            data = file.read(MAX_INVENTORY_BYTES + 1)
        if len(data) > MAX_INVENTORY_BYTES:
            raise InventoryUnreadable(str(path), f"larger than {MAX_INVENTORY_BYTES // 2**20} MiB")
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InventoryUnreadable(str(path), f"not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise InventoryUnreadable(str(path), f"cannot read: {exc.strerror or exc}") from None
    if reads is not None:
        reads.read(os.path.abspath(path), data)
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def _exists(path: Path, reads: Reads | None) -> bool:
    """Whether ``path`` exists; a missing one is noted in ``reads`` (one that exists is read next)."""
    found = path.exists()
    if not found and reads is not None:
        reads.read(os.path.abspath(path), None)
    return found


def write_text(path: StrPath, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all, creating its directory: into a new file
    of a random name beside it (made exclusively, readable by its owner alone, so no link laid
    in its place is followed), then renamed over it.

    :raises InventoryUnreadable: the directory or the file cannot be written.
    """
    path = Path(path)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_whole(path, text.encode("utf-8"), prefix=f".{path.name}.")
    except OSError as exc:
        raise InventoryUnreadable(str(path), f"cannot write: {exc.strerror or exc}") from None


def load_ssh_config(path: StrPath, *, include_dir: StrPath | None = None, reads: Reads | None = None) -> Inventory:
    """The hosts of the ssh_config at ``path``, its ``Include`` files followed (relative paths
    against ``include_dir``, default ``~/.ssh``).

    :raises InventoryUnreadable: the file or an included one cannot be read.
    :raises InventoryInvalid: see :func:`~hostinv.inventory.parse_ssh_config`.
    """
    from .ssh_config import parse_ssh_config  # here, as each parser: loaded when its source is there

    base = Path(include_dir) if include_dir is not None else Path.home() / ".ssh"
    return parse_ssh_config(read_text(path, reads), str(Path(path)), read_include=_include_reader(base, reads))


def _include_reader(base: Path, reads: Reads | None) -> IncludeReader:
    def read(pattern: str) -> Iterator[tuple[str, str]]:
        expanded = os.path.expanduser(pattern)
        if not os.path.isabs(expanded):
            expanded = str(base / expanded)
        # ssh skips an Include that matches nothing; a directory matched by a glob is not a config
        found = cache.matches(expanded)
        if reads is not None:
            reads.matched(expanded, found)
        # One at a time: the parser stops reading at its bound on what a load includes.
        for p in found:
            yield p, read_text(Path(p), reads)

    return read


def load_ansible(path: StrPath, reads: Reads | None = None) -> Inventory:
    """The hosts of the Ansible inventory at ``path`` (INI or YAML).

    :raises InventoryUnreadable: the file cannot be read.
    :raises InventoryInvalid: see :func:`~hostinv.inventory.parse_ansible`.
    """
    from .ansible import parse_ansible  # here: YAML and pydantic load with an Ansible inventory only

    return parse_ansible(read_text(path, reads), str(Path(path)))


def load_inventory(
    inventory_file: StrPath | None = None,
    *,
    ssh_config: StrPath | None = None,
    use_ssh_config: bool = True,
    ansible: StrPath | Sequence[StrPath] = (),
    environ: Mapping[str, str] | None = None,
    home: StrPath | None = None,
    keep_in: StrPath | None = None,
) -> Inventory:
    """The merged view: our file, then the Ansible inventories (those it names, then ``ansible``),
    then the ssh_config (``ssh_config``, else ``~/.ssh/config`` if present; none when not
    ``use_ssh_config``). ``home`` stands in for the user's home directory (tests). ``keep_in``:
    a directory where the view is kept and reused while nothing it was read from changed. Paths
    may be given as ``str`` or :class:`~pathlib.Path`; ``ansible`` as one path or several.

    :raises InventoryUnreadable: a file named explicitly (or through the environment) is missing
        or unreadable, or any file that exists cannot be read.
    :raises InventoryInvalid: a file's content is invalid (the message names file, line, key).
    """
    home = Path(home) if home is not None else Path.home()
    # One path given as a str is a path, not a sequence of one-letter paths.
    extra = [Path(ansible)] if isinstance(ansible, (str, os.PathLike)) else [Path(p) for p in ansible]
    if inventory_file is not None:
        own_path, required = Path(inventory_file), True
    else:
        own_path, required = default_inventory_path(environ)
    config = Path(ssh_config) if ssh_config is not None else home / ".ssh" / "config"
    reads = name = None
    if keep_in is not None:
        absolute = os.path.abspath
        how = [absolute(own_path), required, [absolute(p) for p in extra], ssh_config is not None]
        name = cache.entry_name([*how, use_ssh_config and absolute(config), absolute(home)])
        found = cache.lookup(os.fspath(keep_in), name)
        if found is not None:
            return found
        reads = cache.Reads()
    sources: list[Inventory] = []
    named: list[Path] = []
    if required or _exists(own_path, reads):
        from .own_file import parse_inventory_yaml  # here: YAML and pydantic load with our file only

        own = parse_inventory_yaml(read_text(own_path, reads), str(own_path))
        sources.append(own.inventory)
        named = [own_path.parent / Path(p).expanduser() for p in own.ansible]
    sources.extend(load_ansible(p, reads) for p in (*named, *extra))
    if use_ssh_config and (ssh_config is not None or _exists(config, reads)):
        sources.append(load_ssh_config(config, include_dir=home / ".ssh", reads=reads))
    merged = merge(sources)
    if keep_in is not None and reads is not None and name is not None:
        cache.store(os.fspath(keep_in), name, reads, merged)
    return merged
