"""Ansible inventories, INI and YAML, as inventory hosts.

Both forms become the same picture before any host is built: groups (their hosts in order, their
``vars``, their ``children``), each host's own variables, and where every value was written.
Then, as Ansible does: every host is in ``all``; a host in no other group is in ``ungrouped``; a
host of a child group is in its parents too; variables apply from ``all``, then from groups by
depth (a parent before its children, then by name), then the host's own, later ones winning.

Of the variables, ``ansible_host``, ``ansible_port``, ``ansible_user`` and
``ansible_ssh_private_key_file`` (and their older ``ansible_ssh_*`` spellings) become the host's
fields, ``remote_acp_capacity`` its capacity, and the ssh options in ``ansible_ssh_common_args``
and ``ansible_ssh_extra_args`` (``-o``, ``-J``...) its ``ssh_options`` (the rest of those said in
a note); the rest are Ansible's business and are left out. An option that makes ssh run a local
program (``ProxyCommand``, ``KnownHostsCommand``, ``LocalCommand``...: :data:`RUNS_LOCAL_CODE`)
is left out with a note naming the host and keyword: a file someone else may have written would
run it as the operator; only our own inventory file may set one. A
host whose ``ansible_connection`` is not ssh (``local``, ``docker``...) is left out with a note.
Host ranges (``web[01:03]``, ``db-[a:c]``, with an optional step) are expanded. ``host_vars/``
and ``group_vars/`` directories are not read.

An inventory is hostile until bounded: a range pattern is sized before it is expanded
(``h[0:99][0:99][0:99][0:99]`` is 10^8 names in 26 bytes), and a file may name at most
:data:`MAX_HOSTS` hosts, each pattern too, and :data:`MAX_HOST_ENTRIES` host entries (a host
listed in several groups counts once per group); over that it is refused, not truncated. A value
read into a host's field must be a scalar: a list or mapping is refused before anything turns it
into text (an aliased YAML tree is tiny in memory and enormous as a string).
"""

from __future__ import annotations

import itertools
import re
import shlex
import string
from dataclasses import dataclass, field
from typing import Final

from pydantic import ValidationError

from ..errors import InventoryInvalid
from ..models import Host, Inventory
from .yaml_text import key_path, line_of, load_yaml

__all__ = [
    "MAX_HOSTS",
    "MAX_HOST_ENTRIES",
    "RUNS_LOCAL_CODE",
    "expand_host_range",
    "parse_ansible",
    "parse_ansible_ini",
    "parse_ansible_yaml",
]

MAX_HOSTS: Final = 10_000
"""Most hosts one inventory file, or one range pattern, may name: a fleet, not a data centre's
every address; far past it, expanding and resolving would eat time and memory unbounded."""
MAX_HOST_ENTRIES: Final = 100_000
"""Most host entries a file may hold, a host counted once for each group that lists it."""
RUNS_LOCAL_CODE: Final = frozenset(
    {
        "knownhostscommand",
        "localcommand",
        "permitlocalcommand",
        "pkcs11provider",
        "proxycommand",
        "remotecommand",
        "securitykeyprovider",
        "smartcarddevice",
        "xauthlocation",
    }
)
"""ssh options (lower case) that run a program or load a library on this machine, or choose
what runs on the host in place of the agent: an Ansible inventory's are left out."""
_SHOWN: Final = 80
"""How much of an unexpected value a note quotes."""

_FIELDS = {
    "ansible_host": "address",
    "ansible_port": "port",
    "ansible_user": "user",
    "ansible_ssh_private_key_file": "identity_file",
    "remote_acp_capacity": "capacity",
}
_ALIASES = {
    "ansible_ssh_host": "ansible_host",
    "ansible_ssh_port": "ansible_port",
    "ansible_ssh_user": "ansible_user",
    "ansible_private_key_file": "ansible_ssh_private_key_file",
}
"""Older or shorter spellings of the same variable: a host's ``ansible_ssh_user`` beats a group's ``ansible_user``."""
_SSH_CONNECTIONS = {"ssh", "smart", "paramiko", "paramiko_ssh"}
_RANGE = re.compile(r"\[([0-9a-zA-Z]+):([0-9a-zA-Z]+)(?::([0-9]+))?\]")


@dataclass(frozen=True)
class _Value:
    """A variable's value and where it was written: a line (INI) or a key path (YAML)."""

    value: object
    line: int | None
    loc: tuple[str, ...] = ()


@dataclass
class _Group:
    hosts: dict[str, None] = field(default_factory=dict)  # ordered, with a constant-time membership test
    vars: dict[str, _Value] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)


@dataclass
class _Picture:
    source: str
    text: str
    groups: dict[str, _Group] = field(default_factory=lambda: {"all": _Group(), "ungrouped": _Group()})
    host_vars: dict[str, dict[str, _Value]] = field(default_factory=dict)
    direct: dict[str, list[str]] = field(default_factory=dict)
    """Each host's groups as listed, in the order first seen."""
    entries: int = 0

    def group(self, name: str) -> _Group:
        return self.groups.setdefault(name, _Group())

    def add_host(self, group: str, name: str, variables: dict[str, _Value]) -> str | None:
        """Add ``name`` to ``group``; the reason it cannot be, when a bound is reached."""
        self.entries += 1
        if self.entries > MAX_HOST_ENTRIES:
            return f"the file lists over {MAX_HOST_ENTRIES} host entries"
        if name not in self.host_vars and len(self.host_vars) >= MAX_HOSTS:
            return f"the file names over {MAX_HOSTS} hosts"
        hosts = self.group(group).hosts
        if name not in hosts:
            hosts[name] = None
            self.direct.setdefault(name, []).append(group)
        self.host_vars.setdefault(name, {}).update(variables)
        return None


def parse_ansible(text: str, source: str) -> Inventory:
    """An Ansible inventory in either form: YAML when the name ends in ``.yml``/``.yaml`` or the
    text reads as a YAML mapping, else INI.

    :raises InventoryInvalid: see :func:`parse_ansible_ini` and :func:`parse_ansible_yaml`.
    """
    if source.endswith((".yml", ".yaml")):
        return parse_ansible_yaml(text, source)
    first = next((ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith(("#", ";"))), "")
    if first.startswith("[") or "=" in first:
        return parse_ansible_ini(text, source)
    try:
        data = load_yaml(text, source)
    except InventoryInvalid:
        return parse_ansible_ini(text, source)
    return parse_ansible_yaml(text, source) if isinstance(data, dict) else parse_ansible_ini(text, source)


def parse_ansible_ini(text: str, source: str) -> Inventory:
    """An Ansible INI inventory (``[group]``, ``[group:vars]``, ``[group:children]``).

    :raises InventoryInvalid: a malformed section header, host line or variable line, with its line.
    """
    picture = _Picture(source, text)
    section, kind = "ungrouped", "hosts"
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            header = re.fullmatch(r"\[([^\[\]:\s]+)(?::(vars|children))?\]\s*(?:[#;].*)?", line)
            if header is None:
                raise InventoryInvalid(source, f"not a section header: {line}", line=number)
            section, kind = header.group(1), header.group(2) or "hosts"
            picture.group(section)
            continue
        if kind == "vars":
            name, eq, value = line.partition("=")
            if not eq or not name.strip():
                raise InventoryInvalid(source, f"expected name=value in [{section}:vars]: {line}", line=number)
            picture.group(section).vars[name.strip()] = _Value(_unquote(value.strip()), number)
        elif kind == "children":
            child = line.split()[0]
            if child not in picture.group(section).children:
                picture.group(section).children.append(child)
            picture.group(child)
        else:
            try:
                words = shlex.split(line, comments=True)
            except ValueError:
                raise InventoryInvalid(source, f"unbalanced quotes: {line}", line=number) from None
            variables = {}
            for word in words[1:]:
                name, eq, value = word.partition("=")
                if not eq or not name:
                    raise InventoryInvalid(source, f"expected name=value after the host, got {word!r}", line=number)
                variables[name] = _Value(value, number)
            for host in _expand(words[0], source, number):
                name, port = _host_port(host)
                own = dict(variables)
                if port is not None:
                    own.setdefault("ansible_port", _Value(port, number))
                if (full := picture.add_host(section, name, own)) is not None:
                    raise InventoryInvalid(source, full, line=number)
    return _resolve(picture)


def parse_ansible_yaml(text: str, source: str) -> Inventory:
    """An Ansible YAML inventory (``all:`` or top-level groups, each with ``hosts``, ``vars``, ``children``).

    :raises InventoryInvalid: a syntax error (with its line) or a group or host of the wrong shape
        (with its key path and line).
    """
    data = load_yaml(text, source)
    picture = _Picture(source, text)
    if data is None:
        return _resolve(picture)
    if not isinstance(data, dict):
        raise InventoryInvalid(source, "an Ansible YAML inventory is a mapping of groups", line=1)
    for name, body in data.items():
        _yaml_group(picture, text, str(name), body, (str(name),))
        if name != "all" and name not in picture.groups["all"].children:
            picture.groups["all"].children.append(str(name))
    return _resolve(picture)


def _yaml_group(picture: _Picture, text: str, name: str, body: object, loc: tuple[str, ...]) -> None:
    group = picture.group(name)
    if body is None:
        return
    if not isinstance(body, dict):
        raise _shape(picture, text, loc, "a group is a mapping with hosts, vars or children")
    unknown = set(body) - {"hosts", "vars", "children"}
    if unknown:
        raise _shape(picture, text, (*loc, str(sorted(unknown)[0])), "a group holds only hosts, vars and children")
    hosts = body.get("hosts") or {}
    variables = body.get("vars") or {}
    children = body.get("children") or {}
    for what, value in (("hosts", hosts), ("vars", variables), ("children", children)):
        if not isinstance(value, dict):
            raise _shape(picture, text, (*loc, what), f"{what} must be a mapping")
    for key, value in variables.items():
        group.vars[str(key)] = _Value(value, None, (*loc, "vars", str(key)))
    for host_pattern, host_vars in hosts.items():
        where = (*loc, "hosts", str(host_pattern))
        if host_vars is not None and not isinstance(host_vars, dict):
            raise _shape(picture, text, where, "a host's variables must be a mapping")
        own = {str(k): _Value(v, None, (*where, str(k))) for k, v in (host_vars or {}).items()}
        try:
            expanded = expand_host_range(str(host_pattern))
        except ValueError as exc:
            raise _shape(picture, text, where, str(exc)) from None
        for host in expanded:
            host_name, port = _host_port(host)
            with_port = own if port is None else {"ansible_port": _Value(port, None, where), **own}
            if (full := picture.add_host(name, host_name, with_port)) is not None:
                raise _shape(picture, text, where, full)
    for child, child_body in children.items():
        if str(child) not in group.children:
            group.children.append(str(child))
        _yaml_group(picture, text, str(child), child_body, (*loc, "children", str(child)))


def _shape(picture: _Picture, text: str, loc: tuple[str, ...], reason: str) -> InventoryInvalid:
    return InventoryInvalid(picture.source, reason, line=line_of(text, loc), key=key_path(loc))


def expand_host_range(pattern: str, *, limit: int = MAX_HOSTS) -> list[str]:
    """Ansible's host ranges: ``web[01:03]`` -> web01, web02, web03 (zero padding kept);
    ``db-[a:c]`` -> db-a, db-b, db-c; ``[0:10:5]`` steps by 5. Several ranges multiply.

    The names are counted (the product of the ranges' sizes) before any is made.

    :raises ValueError: a range whose ends are of different kinds, reversed, or a zero step; or
        a pattern naming more than ``limit`` hosts.
    """
    literals: list[str] = []
    ranges: list[range | str] = []  # numbers (with a zero-padding width below) or letters
    widths: list[int] = []
    count, pos = 1, 0
    for match in _RANGE.finditer(pattern):
        start, end, step_text = match.groups()
        step = int(step_text) if step_text else 1
        if step < 1:
            raise ValueError(f"the range [{start}:{end}:{step}] has a zero step")
        items: range | str
        if start.isdigit() and end.isdigit():
            if int(start) > int(end):
                raise ValueError(f"the range [{start}:{end}] is reversed")
            items = range(int(start), int(end) + 1, step)  # sized without being built
            size = (int(end) - int(start)) // step + 1  # len() of a range over sys.maxsize overflows
            widths.append(len(start) if start.startswith("0") else 0)
        elif len(start) == len(end) == 1 and start in string.ascii_letters and end in string.ascii_letters:
            if start > end:
                raise ValueError(f"the range [{start}:{end}] is reversed")
            items = "".join(chr(c) for c in range(ord(start), ord(end) + 1, step))
            size = len(items)
            widths.append(0)
        else:
            raise ValueError(f"the range [{start}:{end}] mixes digits and letters or spans several letters")
        count *= size
        if count > limit:
            raise ValueError(f"the pattern names over {limit} hosts (the bound of one inventory)")
        literals.append(pattern[pos : match.start()])
        ranges.append(items)
        pos = match.end()
    if not ranges:
        return [pattern]
    choices = [
        [str(i).zfill(width) for i in items] if isinstance(items, range) else list(items)
        for items, width in zip(ranges, widths, strict=True)
    ]
    tail = pattern[pos:]
    return [
        "".join(p for pair in zip(literals, combo, strict=True) for p in pair) + tail
        for combo in itertools.product(*choices)
    ]


def _expand(pattern: str, source: str, line: int | None) -> list[str]:
    try:
        return expand_host_range(pattern)
    except ValueError as exc:
        raise InventoryInvalid(source, f"host {pattern}: {exc}", line=line) from None


def _host_port(host: str) -> tuple[str, str | None]:
    """``name:port`` as Ansible writes it; an IPv6 address (several colons) has no port here."""
    if host.count(":") == 1:
        name, port = host.split(":")
        return name, port
    if host.startswith("[") and "]:" in host:
        name, port = host[1:].split("]:")
        return name, port
    return host, None


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _depths(picture: _Picture) -> dict[str, int]:
    """Each group's depth below ``all``: the longest path from a group with no parent (``all``
    among them), those groups themselves at 1 but ``all`` at 0.

    :raises InventoryInvalid: groups that are their own ancestors (Ansible refuses them too).
    """
    waiting = dict.fromkeys(picture.groups, 0)  # parents not yet placed
    for group in picture.groups.values():
        for child in group.children:
            if child != "all":
                waiting[child] += 1
    roots = [name for name, count in waiting.items() if count == 0]
    depth = dict.fromkeys(roots, 0)  # a root's children are at 1, as are the roots themselves
    ready = list(roots)
    while ready:  # parents before children: each edge is followed once
        name = ready.pop()
        for child in picture.groups[name].children:
            if child == "all":
                continue
            depth[child] = max(depth.get(child, 0), depth[name] + 1)
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    looped = sorted(name for name, count in waiting.items() if count > 0)
    if looped:
        shown = ", ".join(looped[:5]) + (", ..." if len(looped) > 5 else "")
        raise InventoryInvalid(picture.source, f"groups that are their own ancestors through children: {shown}")
    return {name: depth[name] or (0 if name == "all" else 1) for name in picture.groups}


def _resolve(picture: _Picture) -> Inventory:
    parents: dict[str, set[str]] = {}
    for name, group in picture.groups.items():
        for child in group.children:
            parents.setdefault(child, set()).add(name)
    depth = _depths(picture)
    hosts: list[Host] = []
    notes: list[str] = []
    layered: dict[tuple[str, ...], tuple[list[str], dict[str, _Value]]] = {}  # hosts in the same groups share this
    for name, direct in picture.direct.items():
        if tuple(direct) not in layered:
            member: set[str] = set()
            todo = list(direct)
            while todo:
                group_name = todo.pop()
                if group_name not in member:
                    member.add(group_name)
                    todo.extend(parents.get(group_name, ()))
            member.discard("all")
            if member - {"ungrouped"}:
                member.discard("ungrouped")
            else:
                member = {"ungrouped"}
            ranked = sorted(member, key=lambda g: (depth[g], g))
            from_groups: dict[str, _Value] = {}
            for layer in (picture.groups["all"].vars, *(picture.groups[g].vars for g in ranked)):
                from_groups.update({_ALIASES.get(k, k): v for k, v in layer.items()})
            layered[tuple(direct)] = ranked, from_groups
        ranked, from_groups = layered[tuple(direct)]
        variables = {**from_groups, **{_ALIASES.get(k, k): v for k, v in picture.host_vars[name].items()}}
        for var in ("ansible_connection", *_FIELDS, *_SSH_ARGS):
            origin = variables.get(var)
            if origin is not None and isinstance(origin.value, (dict, list, tuple, set)):
                kind = "mapping" if isinstance(origin.value, dict) else "list"
                line = origin.line or line_of(picture.text, origin.loc)
                key = key_path(origin.loc) if origin.loc else None
                reason = f"host {name}: {var}: a single value is expected, not a {kind}"
                raise InventoryInvalid(picture.source, reason, line=line, key=key)
        connection = variables.get("ansible_connection")
        if connection is not None and str(connection.value) not in _SSH_CONNECTIONS:
            shown = str(connection.value)[:_SHOWN]
            notes.append(f"{picture.source}: host {name} left out: ansible_connection={shown} is not ssh")
            continue
        chosen = {target: variables[var] for var, target in _FIELDS.items() if var in variables}
        values: dict[str, object] = {k: (str(v.value) if k != "capacity" else v.value) for k, v in chosen.items()}
        options = _ssh_args(picture.source, name, variables, notes)
        if options:
            values["ssh_options"] = options
        shown_groups = [g for g in ranked if g != "ungrouped"] or ["ungrouped"]
        try:
            hosts.append(
                Host.from_fields({"name": name, **values, "groups": shown_groups, "sources": (picture.source,)})
            )
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            target = str(error["loc"][0])
            origin = chosen.get(target)
            var = next((v for v, t in _FIELDS.items() if t == target and v in variables), target)
            if target == "ssh_options":  # the variable that carried the options
                var = next((v for v in _SSH_ARGS if v in variables), var)
                origin = variables.get(var)
            line = None if origin is None else origin.line or line_of(picture.text, origin.loc)
            key = key_path(origin.loc) if origin is not None and origin.loc else None
            raise InventoryInvalid(picture.source, f"host {name}: {var}: {error['msg']}", line=line, key=key) from None
    return Inventory(hosts=tuple(hosts), notes=tuple(notes))


_SSH_ARGS: Final = ("ansible_ssh_common_args", "ansible_ssh_extra_args")
"""Where Ansible users keep the ssh options a host needs (a ProxyJump, a ProxyCommand)."""
_FLAG_OPTION: Final = {"-J": "ProxyJump", "-p": "Port", "-i": "IdentityFile", "-l": "User"}


def _ssh_args(source: str, name: str, variables: dict[str, _Value], notes: list[str]) -> dict[str, str]:
    """The ssh options ``ansible_ssh_common_args`` and ``ansible_ssh_extra_args`` carry, as
    ``ssh_options`` (``-o Key=Value``, ``-o 'Key Value'``, ``-J``, ``-p``, ``-i``, ``-l``); what else
    they hold cannot reach a session's ssh, and is said in a note rather than dropped silently."""
    options: dict[str, str] = {}
    for var in _SSH_ARGS:
        origin = variables.get(var)
        if origin is None or not str(origin.value).strip():
            continue
        try:
            words = shlex.split(str(origin.value))
        except ValueError as exc:
            notes.append(f"{source}: host {name}: {var} does not read as ssh arguments ({exc}): not carried")
            continue
        left: list[str] = []
        while words:
            word = words.pop(0)
            flag, value = (word[:2], word[2:]) if word[:2] in ("-o", *_FLAG_OPTION) else (word, "")
            if flag in ("-o", *_FLAG_OPTION) and not value and words:
                value = words.pop(0)
            if flag == "-o" and value:
                key, sep, setting = value.partition("=")
                if not sep:
                    key, _, setting = value.partition(" ")
                if key.strip() and setting.strip():
                    if key.strip().lower() in RUNS_LOCAL_CODE:
                        notes.append(
                            f"{source}: host {name}: {var}: the ssh option {key.strip()[:_SHOWN]} runs a local "
                            "program: left out (only our own inventory file may set it)"
                        )
                    else:
                        options.setdefault(key.strip(), setting.strip())
                    continue
            elif flag in _FLAG_OPTION and value:
                options.setdefault(_FLAG_OPTION[flag], value)
                continue
            left.append(word if not value else f"{word} {value}")
        if left:
            shown = " ".join(left)[:_SHOWN]
            notes.append(
                f"{source}: host {name}: {var}: {shown} not carried (only -o, -J, -p, -i and -l become ssh_options)"
            )
    return options
