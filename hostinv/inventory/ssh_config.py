"""The ``Host`` entries of an OpenSSH client config, as inventory hosts reached by their alias.

Every alias a ``Host`` line names without a wildcard (``*``, ``?``) or negation (``!``) is a host.
Such a host reaches ssh as the user's own ``ssh lab1`` would: by its alias, with nothing read
here passed back as an override (no ``-o``, ``-p``, ``-l``, no generated ``Host`` block), so ssh
applies the config itself, ``Match`` blocks, tokens and all. What the ``Host`` blocks say of
``HostName``, ``Port``, ``User`` and the first ``IdentityFile`` is kept for display only
(:attr:`~hostinv.models.Host.from_ssh_config`): for each the first value obtained, from the
blocks whose patterns match the alias, in file order, as ssh reads them. ``Match`` blocks are
left out of that display with a note (their conditions are decided only when connecting); other
keywords are ssh's business.

Blocks are indexed by the plain names their patterns list, so an alias visits its own blocks and
the blocks with a wildcard, in file order, not every block of a fleet-sized config. ``Include``
is followed where it stands (relative paths against ``~/.ssh``, globs expanded, at most 16 deep
as in ssh), and a load includes at most :data:`MAX_INCLUDED_FILES` files and
:data:`MAX_INCLUDED_BYTES` bytes in all: a few bytes of ``Include`` lines including directories
that include themselves would otherwise fan out without end.

Parsing is pure: the caller passes a function that reads an ``Include``'s files.
"""

from __future__ import annotations

import fnmatch
import heapq
import re
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from pydantic import ValidationError

from ..errors import InventoryInvalid
from ..models import Host, Inventory

__all__ = ["MAX_INCLUDED_BYTES", "MAX_INCLUDED_FILES", "IncludeReader", "parse_ssh_config"]

IncludeReader = Callable[[str], Iterable[tuple[str, str]]]
"""Given an ``Include`` argument (as written), the ``(source, text)`` of each file it names, in
order; read lazily, it reads no more than the parser takes."""

MAX_INCLUDED_FILES: Final = 1_000
"""Most files one load includes, counting a file each time it is included: far above any real
config's ``config.d``, far below what an ``Include`` fan-out would read."""
MAX_INCLUDED_BYTES: Final = 16 * 2**20
"""Most bytes (UTF-8) the included files of one load hold in all."""

_MAX_DEPTH = 16
_FIELDS = {"hostname": "address", "port": "port", "user": "user", "identityfile": "identity_file"}


@dataclass
class _Block:
    patterns: tuple[str, ...]
    """``()`` for the lines before the first Host (they apply to every host)."""
    options: list[tuple[str, str, str, int]] = field(default_factory=list)
    """Those of the fields: (keyword as written, value, source, line)."""


@dataclass
class _Budget:
    files: int = 0
    bytes: int = 0


def parse_ssh_config(text: str, source: str, *, read_include: IncludeReader | None = None) -> Inventory:
    """The hosts named by ``Host`` lines of the ssh_config ``text``, with notes for what was skipped.

    :raises InventoryInvalid: a line ssh would refuse too (a keyword without a value, unbalanced
        quotes, a bad port), an ``Include`` nested too deep, or includes over
        :data:`MAX_INCLUDED_FILES` files or :data:`MAX_INCLUDED_BYTES` bytes; naming the file and line.
    """
    blocks: list[_Block] = [_Block(())]
    notes: list[str] = []
    _read(text, source, blocks, notes, read_include, depth=0, budget=_Budget())
    aliases = dict.fromkeys(p for b in blocks for p in b.patterns if not any(c in p for c in "*?!"))
    matchers = [_Patterns(b.patterns) for b in blocks]
    # Which blocks an alias may match: those listing its name, and those with a wildcard (or none
    # of the Host lines: the lines at the top) for every alias. A block listing only negations
    # matches nothing. Blocks without a field to read are not visited at all.
    by_name: dict[str, list[int]] = {}
    everyone: list[int] = []
    for index, (block, matcher) in enumerate(zip(blocks, matchers, strict=True)):
        if not block.options:
            continue
        if not block.patterns or matcher.globs:
            everyone.append(index)
        else:
            for name in matcher.names:
                by_name.setdefault(name, []).append(index)
    hosts = []
    for alias in aliases:
        values: dict[str, tuple[str, str, str, int]] = {}  # field: (value, keyword, source, line)
        # In file order, as ssh reads them: the two lists are each in order, and share no block.
        for index in heapq.merge(by_name.get(alias.lower(), ()), everyone):
            block = blocks[index]
            if block.patterns and not matchers[index].match(alias):
                continue
            for keyword, value, where, line in block.options:
                values.setdefault(_FIELDS[keyword.lower()], (value, keyword, where, line))
            if len(values) == len(_FIELDS):
                break
        fields: dict[str, object] = {
            k: v[0].replace("%h", alias) if k == "address" else v[0] for k, v in values.items()
        }
        try:
            checked = Host.from_fields({"name": alias, **fields, "sources": (source,)})
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            field_name = str(error["loc"][0])
            if field_name not in values:  # the alias itself
                raise InventoryInvalid(source, f"Host {alias}: {error['msg']}") from None
            _, keyword, where, line = values[field_name]
            raise InventoryInvalid(where, f"{keyword} for Host {alias}: {error['msg']}", line=line) from None
        # Shown, never an override: the host is reached by its alias (see the module's header).
        shown = {k: str(getattr(checked, k)) for k in values}
        hosts.append(Host(name=checked.name, from_ssh_config=shown, sources=checked.sources))
    return Inventory(hosts=tuple(hosts), notes=tuple(notes))


def _read(
    text: str,
    source: str,
    blocks: list[_Block],
    notes: list[str],
    read_include: IncludeReader | None,
    depth: int,
    budget: _Budget,
) -> None:
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        keyword, args = _split(line, source, number)
        key = keyword.lower()
        if key == "host":
            blocks.append(_Block(tuple(args)))
        elif key == "match":
            blocks.append(_Block(("!*",)))  # matches nothing here: ssh decides it when connecting
            notes.append(f"{source}:{number}: Match block not shown in the listing (ssh applies it when connecting)")
        elif key == "include":
            if depth >= _MAX_DEPTH:
                raise InventoryInvalid(source, "Include nested too deeply", line=number)
            current = blocks[-1]
            for pattern in args:
                if read_include is None:
                    notes.append(f"{source}:{number}: Include {pattern} not followed")
                    continue
                for inc_source, inc_text in read_include(pattern):
                    budget.files += 1
                    budget.bytes += len(inc_text.encode("utf-8", "surrogateescape"))
                    if budget.files > MAX_INCLUDED_FILES or budget.bytes > MAX_INCLUDED_BYTES:
                        bound = (
                            f"{MAX_INCLUDED_FILES} files"
                            if budget.files > MAX_INCLUDED_FILES
                            else f"{MAX_INCLUDED_BYTES // 2**20} MiB"
                        )
                        reason = f"Include {pattern}: the config includes over {bound} in all (at {inc_source})"
                        raise InventoryInvalid(source, reason, line=number)
                    _read(inc_text, inc_source, blocks, notes, read_include, depth + 1, budget)
            if blocks[-1] is not current:  # as in ssh, the lines after an Include belong to the block around it
                blocks.append(_Block(current.patterns))
        elif key in _FIELDS:
            blocks[-1].options.append((keyword, " ".join(args), source, number))


def _split(line: str, source: str, number: int) -> tuple[str, list[str]]:
    """``Keyword value...`` or ``Keyword=value``, with ssh's double quotes."""
    keyword, _, rest = line.replace("\t", " ").partition(" ")
    if "=" in keyword:
        keyword, _, first = keyword.partition("=")
        rest = f"{first} {rest}"
    rest = rest.strip().removeprefix("=").strip()
    try:
        lexer = shlex.shlex(rest, posix=True)
        lexer.whitespace_split = True
        lexer.commenters = ""
        lexer.quotes = '"'
        lexer.escape = ""
        args = list(lexer)
    except ValueError:
        raise InventoryInvalid(source, f"{keyword}: unbalanced quotes", line=number) from None
    if not keyword or not args:
        raise InventoryInvalid(source, f"{keyword or line!r} has no value", line=number)
    return keyword, args


class _Patterns:
    """A Host line's patterns, matched as ssh does: any positive pattern matches and no negated
    one does (case-insensitive; ssh knows only ``*`` and ``?``). Plain names are a set lookup, so
    a config that lists a fleet (every alias against every block) costs no glob per pair."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self.names: set[str] = set()
        self.negated_names: set[str] = set()
        self.globs: list[re.Pattern[str]] = []
        self.negated_globs: list[re.Pattern[str]] = []
        for pattern in patterns:
            negated = pattern.startswith("!")
            text = pattern.removeprefix("!").lower()
            if any(c in text for c in "*?"):
                glob = re.compile(fnmatch.translate(text.replace("[", "[[]")))
                (self.negated_globs if negated else self.globs).append(glob)
            else:
                (self.negated_names if negated else self.names).add(text)

    def match(self, alias: str) -> bool:
        name = alias.lower()
        if name in self.negated_names or any(g.match(name) for g in self.negated_globs):
            return False
        return name in self.names or any(g.match(name) for g in self.globs)
