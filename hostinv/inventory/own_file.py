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
and ``groups`` add to the default's (a mapping merges, a list joins). Unknown keys are refused (a
typo such as ``prot`` would otherwise be silently ignored). The keys a host may have, and their
shapes, are derived from :class:`~hostinv.models.Host` (:data:`~hostinv.models.SETTINGS`).
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from ..errors import InventoryInvalid
from ..models import SETTINGS, Host, Inventory
from .yaml_text import invalid_from_validation, line_of, load_yaml

__all__ = ["OwnFile", "dump_inventory_yaml", "parse_inventory_yaml"]


def _shape(hint: Any) -> tuple[Any, Any]:
    """What the file may hold for a field of type ``hint``, and its default: a collection as
    itself (a tuple as a list, as YAML writes it), empty; anything else optional, ``None``. Only
    the shape is checked here, with the key path; :meth:`Host.from_fields` checks the values."""
    origin = typing.get_origin(hint)
    if origin is tuple:
        return list[typing.get_args(hint)[0]], Field(default_factory=list)  # type: ignore[misc]
    if origin is dict:
        return hint, Field(default_factory=dict)
    return hint | None, None


# What a file may say about a host: the fields of :data:`~hostinv.models.SETTINGS`, derived from
# :class:`Host` when the module loads. A type checker sees a model of no fields in particular.
if TYPE_CHECKING:
    _HostFields = BaseModel
else:
    _hints = typing.get_type_hints(Host)
    _HostFields = create_model(
        "_HostFields", __config__=ConfigDict(extra="forbid"), **{k: _shape(_hints[k]) for k in SETTINGS}
    )


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
        for key, value in merged.items():  # a mapping merged key by key, a list joined
            if isinstance(value, dict):
                merged[key] = {**base.get(key, {}), **own.get(key, {})}
            elif isinstance(value, list):
                merged[key] = list(dict.fromkeys([*base.get(key, []), *own.get(key, [])]))
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
        fields = {k: v for k, v in host.set_values().items() if k in SETTINGS}
        hosts[host.name] = {k: v for k, v in fields.items() if v not in ({}, [], None)} or None
    comment = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    return comment + yaml.safe_dump({"hosts": hosts}, sort_keys=False, default_flow_style=False, allow_unicode=True)
