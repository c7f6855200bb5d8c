"""Our own inventory file: YAML, read and written here.

Shape (every key optional; ``hosts`` maps a name to its fields, or to nothing)::

    defaults:            # fields every host of this file starts from
      user: ci
    hosts:
      build-1:
        address: 10.0.0.11
        port: 22
        identity_file: ~/.ssh/ci_ed25519
        groups: [build, linux]
        labels: {arch: x86_64}
        capacity: 4
        ssh_options: {ProxyJump: bastion}
      build-2:
    ansible: [hosts.ini]  # Ansible inventories merged into the view (relative to this file)

A field a host sets replaces the default; ``labels`` and ``ssh_options`` are merged key by key
and ``groups`` add to the default's. Unknown keys are refused (a typo such as ``prot`` would
otherwise be silently ignored).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import InventoryInvalid
from ..models import Host, Inventory
from .yaml_text import invalid_from_validation, line_of, load_yaml

__all__ = ["OwnFile", "dump_inventory_yaml", "parse_inventory_yaml"]


class _HostFields(BaseModel):
    """What a file may say about a host: every field of :class:`Host` but its name and sources."""

    model_config = ConfigDict(extra="forbid")

    address: str | None = None
    port: int | None = None
    user: str | None = None
    identity_file: str | None = None
    groups: list[str] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)
    capacity: int | None = None
    ssh_options: dict[str, str] = Field(default_factory=dict)


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")

    defaults: _HostFields = Field(default_factory=_HostFields)
    hosts: dict[Annotated[str, Field(min_length=1)], _HostFields | None] = Field(default_factory=dict)
    ansible: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)


@dataclass(frozen=True)
class OwnFile:
    """Our inventory file, parsed: its hosts, and the Ansible inventories it names (as written)."""

    inventory: Inventory
    ansible: tuple[str, ...] = ()


def parse_inventory_yaml(text: str, source: str) -> OwnFile:
    """Parse our inventory file's ``text`` (``source`` names it in errors and in ``Host.sources``).

    :raises InventoryInvalid: a syntax error (with its line) or a value of the wrong shape (with
        its key path and line).
    """
    data = load_yaml(text, source)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InventoryInvalid(source, f"the file must be a mapping (hosts:, defaults:), not {type(data).__name__}")
    try:
        parsed = _File.model_validate(data)
    except ValidationError as exc:
        raise invalid_from_validation(exc, source, text) from None
    hosts = []
    base = parsed.defaults.model_dump(exclude_unset=True)
    for name, fields in parsed.hosts.items():
        own = {} if fields is None else fields.model_dump(exclude_unset=True)
        merged = {**base, **own}
        for key in ("labels", "ssh_options"):
            merged[key] = {**base.get(key, {}), **own.get(key, {})}
        merged["groups"] = list(dict.fromkeys([*base.get("groups", []), *own.get("groups", [])]))
        fields_set = {k for k, v in merged.items() if v not in ({}, [])}
        try:
            host = Host.from_fields({"name": name, **{k: merged[k] for k in fields_set}, "sources": (source,)})
        except ValidationError as exc:
            field = exc.errors()[0]["loc"][0]
            if field == "name":
                reason = f"the host name {name!r} {exc.errors()[0]['msg'].removeprefix('Value error, ')}"
                raise InventoryInvalid(source, reason, line=line_of(text, ("hosts", name)), key="hosts") from None
            prefix = ("hosts", name) if field in own else ("defaults",)
            raise invalid_from_validation(exc, source, text, prefix=prefix) from None
        hosts.append(host)
    return OwnFile(inventory=Inventory(hosts=tuple(hosts)), ansible=tuple(parsed.ansible))


def dump_inventory_yaml(inventory: Inventory, *, header: str = "") -> str:
    """``inventory``'s hosts as our YAML file (fields left unset are left out; ``sources`` is not
    written, nor ``from_ssh_config``: written here it would become an override of the ssh_config)."""
    hosts: dict[str, dict[str, object] | None] = {}
    for host in inventory.hosts:
        fields = {k: v for k, v in host.set_values().items() if k not in ("name", "sources", "from_ssh_config")}
        hosts[host.name] = {k: v for k, v in fields.items() if v not in ({}, [], None)} or None
    comment = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    return comment + yaml.safe_dump({"hosts": hosts}, sort_keys=False, default_flow_style=False, allow_unicode=True)
