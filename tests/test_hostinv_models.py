"""Host and Inventory models: validation, the ssh destination, the stable JSON form."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from hostinv import DEFAULT_CAPACITY, Host, Inventory


@pytest.mark.parametrize(
    ("fields", "destination"),
    [
        ({"name": "b1"}, "b1"),
        ({"name": "b1", "address": "10.0.0.5"}, "10.0.0.5"),
        ({"name": "b1", "user": "ci"}, "ci@b1"),
        ({"name": "b1", "port": 2201}, "b1:2201"),
        ({"name": "b1", "address": "::1", "port": 22, "user": "ci"}, "ci@[::1]:22"),
        ({"name": "b1", "address": "fe80::1"}, "fe80::1"),
    ],
)
def test_destination_is_what_ssh_is_given(fields: dict[str, object], destination: str) -> None:
    assert Host.from_fields(fields).destination == destination


@pytest.mark.parametrize(
    "fields",
    [
        {"name": ""},
        {"name": "-oProxyCommand=x"},
        {"name": "a b"},
        {"name": "a\x1bb"},
        {"name": "b", "address": "-x"},
        {"name": "b", "user": "-l"},
        {"name": "b", "port": 0},
        {"name": "b", "port": 65536},
        {"name": "b", "capacity": 0},
        {"name": "b", "nickname": "x"},
        {"name": "b", "groups": ["has space"]},
    ],
)
def test_host_refuses_values_that_would_misbehave(fields: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        Host.from_fields(fields)


def test_defaults_and_json_keys_are_stable() -> None:
    host = Host(name="b1")
    assert host.capacity == DEFAULT_CAPACITY == 1
    assert host.to_json() == {
        "name": "b1",
        "address": None,
        "port": None,
        "user": None,
        "identity_file": None,
        "groups": [],
        "labels": {},
        "capacity": 1,
        "ssh_options": {},
        "from_ssh_config": {},
        "destination": "b1",
        "sources": [],
    }


def test_inventory_lookup_and_groups_in_first_appearance_order() -> None:
    inventory = Inventory(hosts=(Host(name="a", groups=("x", "y")), Host(name="b", groups=("z", "x"))))
    assert inventory.get("b") == inventory.hosts[1]
    assert inventory.get("c") is None
    assert inventory.groups == ("x", "y", "z")
