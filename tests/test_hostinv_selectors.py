"""Selectors: groups, globs, names, addresses; inventory order; clear errors."""

from __future__ import annotations

import pytest

from hostinv import Host, Inventory, SelectorInvalid, SelectorUnmatched, parse_address, select

INVENTORY = Inventory(
    hosts=(
        Host(name="bastion"),
        Host(name="build-01", address="10.1.0.1", user="ci", groups=("build", "linux")),
        Host(name="build-02", address="10.1.0.2", user="ci", groups=("build", "linux")),
        Host(name="web01", groups=("web", "linux")),
        Host(name="gpu-a100-1", groups=("gpu",), port=2022),
        Host(name="stray", groups=("ungrouped",)),
    )
)


def names(selectors: list[str]) -> list[str]:
    return [h.name for h in select(INVENTORY, selectors)]


@pytest.mark.parametrize(
    ("selectors", "expected"),
    [
        (["@build"], ["build-01", "build-02"]),
        (["@linux"], ["build-01", "build-02", "web01"]),
        (["@all"], ["bastion", "build-01", "build-02", "web01", "gpu-a100-1", "stray"]),
        (["@ungrouped"], ["bastion", "stray"]),
        (["build-*"], ["build-01", "build-02"]),
        (["build-0?"], ["build-01", "build-02"]),
        (["build-0[2-9]"], ["build-02"]),
        (["web01"], ["web01"]),
        # inventory order, not selector order; each host once
        (["web01", "bastion", "@build", "build-01"], ["bastion", "build-01", "build-02", "web01"]),
    ],
)
def test_selectors_pick_hosts_in_inventory_order(selectors: list[str], expected: list[str]) -> None:
    assert names(selectors) == expected


def test_an_address_outside_the_inventory_is_a_host_of_its_own_after_the_inventory_hosts() -> None:
    chosen = select(INVENTORY, ["admin@10.9.9.9:2200", "web01", "[::1]:2201", "192.0.2.7", "fe80::1"])
    assert [h.name for h in chosen] == ["web01", "admin@10.9.9.9:2200", "[::1]:2201", "192.0.2.7", "fe80::1"]
    assert [h.destination for h in chosen[1:]] == ["admin@10.9.9.9:2200", "[::1]:2201", "192.0.2.7", "fe80::1"]
    assert chosen[1].sources == ("selector",)
    assert chosen[1].capacity == 1


def test_an_address_naming_an_inventory_host_keeps_its_fields_and_overrides_user_and_port() -> None:
    (host,) = select(INVENTORY, ["root@build-01:2222"])
    # Named as written, so the same host as two users is two rows (see below).
    assert (host.name, host.address, host.user, host.port, host.groups) == (
        "root@build-01:2222", "10.1.0.1", "root", 2222, ("build", "linux"),
    )  # fmt: skip
    assert {"user", "port"} <= host.fields_set  # what the address says counts as set
    (same,) = select(INVENTORY, ["gpu-a100-1:22"])
    assert same.port == 22


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("@nope", "no host is in the group 'nope' (groups: @build, @linux, @web, @gpu, @ungrouped)"),
        ("db-*", "the pattern 'db-*' matches no host of the inventory (6 hosts)"),
        ("buidl-01", "no host named 'buidl-01' in the inventory (6 hosts); for a host in no inventory write"),
    ],
)
def test_a_selector_that_matches_nothing_says_so(selector: str, message: str) -> None:
    with pytest.raises(SelectorUnmatched) as info:
        select(INVENTORY, ["web01", selector])
    assert str(info.value).startswith(message)
    assert isinstance(info.value, LookupError)


def test_an_empty_inventory_names_no_group() -> None:
    with pytest.raises(SelectorUnmatched, match=r"\(groups: none\)"):
        select(Inventory(), ["@build"])
    with pytest.raises(SelectorUnmatched, match=r"\(empty\)"):
        select(Inventory(), ["x"])


@pytest.mark.parametrize(
    "selector",
    ["", " ", "a b", "host\x00", "-oProxyCommand=x", "-x:22", "user@-host", "-u@host", "@", "user@", ":22"]
    + ["host:0", "host:65536", "host:ssh", "[::1", "[::1]x", "host:\u00b2"]
    + ["u@" + "a" * 300 + ":22"],  # longer than any host name: refused, not a validation traceback
)
def test_a_malformed_selector_is_refused(selector: str) -> None:
    with pytest.raises((SelectorInvalid, SelectorUnmatched)) as info:
        select(INVENTORY, [selector])
    assert not isinstance(info.value, SelectorUnmatched) or selector == "@"


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("h", (None, "h", None)),
        ("u@h", ("u", "h", None)),
        ("h:22", (None, "h", 22)),
        ("u@h:22", ("u", "h", 22)),
        ("[::1]:22", (None, "::1", 22)),
        ("u@[::1]", ("u", "::1", None)),
        ("2001:db8::1", (None, "2001:db8::1", None)),
        ("a@b@h", ("a@b", "h", None)),
    ],
)
def test_parse_address(text: str, parsed: tuple[str | None, str, int | None]) -> None:
    assert parse_address(text) == parsed


def test_one_inventory_host_reached_as_two_users_is_two_hosts() -> None:
    from hostinv import Host, Inventory, select

    inventory = Inventory(hosts=(Host(name="build-1", address="10.0.0.5", port=2222),))
    hosts = select(inventory, ["alice@build-1", "bob@build-1", "build-1"])
    assert [(h.name, h.destination) for h in hosts] == [
        ("build-1", "10.0.0.5:2222"),
        ("alice@build-1", "alice@10.0.0.5:2222"),
        ("bob@build-1", "bob@10.0.0.5:2222"),
    ]


def test_an_ssh_config_alias_reached_as_another_user_keeps_its_alias() -> None:
    from hostinv import Host, Inventory, select

    (host,) = select(Inventory(hosts=(Host(name="lab1"),)), ["ra-x@lab1"])
    assert (host.name, host.destination) == ("ra-x@lab1", "ra-x@lab1")
