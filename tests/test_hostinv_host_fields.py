"""A host's fields are declared once, by the ``Host`` dataclass: the validator, our file's schema,
the JSON form and the merge are derived from it. Each test walks the dataclass's own fields, so a
field added there that one of them did not take up fails here."""

from __future__ import annotations

import dataclasses
import json
import typing

import pytest
import yaml
from pydantic import ValidationError

from hostinv import Host, Inventory, dump_inventory_yaml, merge, parse_inventory_yaml
from hostinv.models import HOST_FIELDS, SETTINGS

HINTS = typing.get_type_hints(Host)


def sample(name: str, other: bool = False) -> object:
    """A valid value of the field ``name``, other than its default, chosen by its type alone
    (``other``: a second one, different from the first)."""
    hint = HINTS[name]
    if hint in (str, str | None):
        return f"{name.replace('_', '-')}-{2 if other else 1}"
    if hint in (int, int | None):
        return 3 if other else 2
    if hint == tuple[str, ...]:
        return ("third",) if other else ("first", "second")
    if hint == dict[str, str]:
        return {"ProxyJump": "jump", "User": "ci"} if other else {"ProxyJump": "bastion"}
    raise AssertionError(f"Host.{name}: a field of a type this test has no sample for: {hint}")


SET = {name: sample(name) for name in SETTINGS}


def test_the_settings_are_every_field_but_the_name_what_ssh_config_shows_and_the_sources() -> None:
    assert [f.name for f in dataclasses.fields(Host)] == [*HOST_FIELDS, "fields_set"]
    assert set(HOST_FIELDS) - set(SETTINGS) == {"name", "from_ssh_config", "sources"}


def test_validation_takes_every_field_a_source_gives_with_the_dataclass_defaults() -> None:
    given = {"name": "h1", **SET, "sources": ("inv.yaml",)}
    host = Host.from_fields(given)
    assert host == Host(**given)  # type: ignore[arg-type]
    assert host.fields_set == set(given)
    assert Host.from_fields({"name": "h1"}) == Host("h1")  # every default is the dataclass's
    with pytest.raises(ValidationError):  # shown for display, never given
        Host.from_fields({"name": "h1", "from_ssh_config": {"user": "ci"}})


def test_our_file_reads_and_writes_every_setting() -> None:
    host = Host("h1", **SET)  # type: ignore[arg-type]
    text = dump_inventory_yaml(Inventory(hosts=(host,)))
    (back,) = parse_inventory_yaml(text, "inv.yaml").inventory.hosts
    assert {k: getattr(back, k) for k in SETTINGS} == SET
    assert back.fields_set == {"name", *SETTINGS, "sources"}
    for name in SETTINGS:  # each one a default of the file may set, too
        value = list(v) if isinstance(v := SET[name], tuple) else v
        text = yaml.safe_dump({"defaults": {name: value}, "hosts": {"h1": None}})
        (one,) = parse_inventory_yaml(text, "inv.yaml").inventory.hosts
        assert getattr(one, name) == SET[name]


def test_the_json_form_has_every_field_and_reads_back() -> None:
    host = Host("h1", **SET, from_ssh_config={"user": "ci"}, sources=("inv.yaml",))  # type: ignore[arg-type]
    data = host.to_json()
    assert list(data) == [*(k for k in HOST_FIELDS if k != "sources"), "destination", "sources"]
    assert Host.from_json(json.loads(json.dumps(data))) == host


def test_every_field_merges_first_source_first() -> None:
    first = Host("h1", **SET, sources=("a.yaml",))  # type: ignore[arg-type]
    other = {name: sample(name, other=True) for name in SETTINGS}  # a second source, other values
    second = Host("h1", **other, sources=("b.yaml",))  # type: ignore[arg-type]
    (merged,) = merge([Inventory(hosts=(first,)), Inventory(hosts=(second,))]).hosts
    assert merged.sources == ("a.yaml", "b.yaml")
    for name in SETTINGS:
        mine, theirs = SET[name], other[name]
        if isinstance(mine, tuple):
            assert getattr(merged, name) == (*mine, *theirs)  # type: ignore[misc]
        elif isinstance(mine, dict):
            assert getattr(merged, name) == {**theirs, **mine}  # type: ignore[dict-item]
        else:
            assert getattr(merged, name) == mine
