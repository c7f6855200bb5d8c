"""The ``Host`` entries of an OpenSSH client config, as inventory hosts.

Every alias a ``Host`` line names without a wildcard (``*``, ``?``) or negation (``!``) is a host.
Its fields are what ssh itself would use: for each keyword the first value obtained wins, taken
from every ``Host`` block whose patterns match the alias, in file order (so ``Host *`` defaults at
the end apply, and an earlier specific block beats them). ``HostName``, ``Port``, ``User`` and the
first ``IdentityFile`` become fields; every other keyword goes to ``ssh_options``, so an imported
host keeps its ``ProxyJump``. ``Include`` is followed where it stands (relative paths against
``~/.ssh``, globs expanded, at most 16 deep as in ssh). ``Match`` blocks are skipped with a note:
their conditions (exec, user, canonical...) cannot be decided without connecting.

Parsing is pure: the caller passes a function that reads an ``Include``'s files.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pydantic import ValidationError

from ..errors import InventoryInvalid
from ..models import Host, Inventory

__all__ = ["IncludeReader", "parse_ssh_config"]

IncludeReader = Callable[[str], Sequence[tuple[str, str]]]
"""Given an ``Include`` argument (as written), the ``(source, text)`` of each file it names, in order."""

_MAX_DEPTH = 16
_FIELDS = {"hostname": "address", "port": "port", "user": "user", "identityfile": "identity_file"}
_NOT_OPTIONS = {"host", "match", "include"}


@dataclass
class _Block:
    patterns: tuple[str, ...]
    """``()`` for the lines before the first Host (they apply to every host)."""
    options: list[tuple[str, str, str, int]] = field(default_factory=list)
    """(keyword as written, value, source, line)."""


def parse_ssh_config(text: str, source: str, *, read_include: IncludeReader | None = None) -> Inventory:
    """The hosts named by ``Host`` lines of the ssh_config ``text``, with notes for what was skipped.

    :raises InventoryInvalid: a line ssh would refuse too (a keyword without a value, unbalanced
        quotes, a bad port), or an ``Include`` nested too deep; naming the file and line.
    """
    blocks: list[_Block] = [_Block(())]
    notes: list[str] = []
    _read(text, source, blocks, notes, read_include, depth=0)
    aliases = dict.fromkeys(p for b in blocks for p in b.patterns if not any(c in p for c in "*?!"))
    matchers = [_Patterns(b.patterns) if b.patterns else None for b in blocks]
    hosts = []
    for alias in aliases:
        values: dict[str, tuple[str, str, str, int]] = {}  # field: (value, keyword, source, line)
        options: dict[str, str] = {}
        for block, matcher in zip(blocks, matchers, strict=True):
            if matcher is not None and not matcher.match(alias):
                continue
            for keyword, value, where, line in block.options:
                key = keyword.lower()
                if key in _FIELDS:
                    values.setdefault(_FIELDS[key], (value, keyword, where, line))
                elif key not in {k.lower() for k in options}:
                    options[keyword] = value
        fields: dict[str, object] = {
            k: v[0].replace("%h", alias) if k == "address" else v[0] for k, v in values.items()
        }
        try:
            hosts.append(Host.from_fields({"name": alias, **fields, "ssh_options": options, "sources": (source,)}))
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            field_name = str(error["loc"][0])
            if field_name not in values:  # the alias itself
                raise InventoryInvalid(source, f"Host {alias}: {error['msg']}") from None
            _, keyword, where, line = values[field_name]
            raise InventoryInvalid(where, f"{keyword} for Host {alias}: {error['msg']}", line=line) from None
    return Inventory(hosts=tuple(hosts), notes=tuple(notes))


def _read(
    text: str, source: str, blocks: list[_Block], notes: list[str], read_include: IncludeReader | None, depth: int
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
            blocks.append(_Block(("!*",)))  # matches nothing: the block's options are not applied
            notes.append(f"{source}:{number}: Match block ignored (its conditions are decided only when connecting)")
        elif key == "include":
            if depth >= _MAX_DEPTH:
                raise InventoryInvalid(source, "Include nested too deeply", line=number)
            current = blocks[-1]
            for pattern in args:
                if read_include is None:
                    notes.append(f"{source}:{number}: Include {pattern} not followed")
                    continue
                for inc_source, inc_text in read_include(pattern):
                    _read(inc_text, inc_source, blocks, notes, read_include, depth + 1)
            if blocks[-1] is not current:  # as in ssh, the lines after an Include belong to the block around it
                blocks.append(_Block(current.patterns))
        else:
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
