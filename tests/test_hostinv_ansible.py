"""Ansible inventories (INI and YAML): groups of groups, vars precedence, ranges, all/ungrouped."""

from __future__ import annotations

from pathlib import Path

import pytest

from hostinv import Host, InventoryInvalid, load_ansible, parse_ansible
from hostinv.inventory import expand_host_range, parse_ansible_ini, parse_ansible_yaml

FIXTURES = Path(__file__).parent / "fixtures" / "inventory" / "ansible"


def row(host: Host) -> tuple[str, str, tuple[str, ...], int]:
    return host.name, host.destination, host.groups, host.capacity


def test_ini_inventory_with_children_vars_ranges_and_implicit_groups() -> None:
    inventory = load_ansible(FIXTURES / "hosts.ini")
    assert [row(h) for h in inventory.hosts] == [
        # before any section: ungrouped; its own ansible_user beats [all:vars]
        ("bastion.example.net", "ops@bastion.example.net:22", ("ungrouped",), 1),
        # a range, zero padding kept; [linux:children] makes web hosts linux hosts too
        ("web01.example.com", "deploy@web01.example.com:22", ("linux", "web"), 1),
        ("web02.example.com", "deploy@web02.example.com:22", ("linux", "web"), 1),
        ("web03.example.com", "deploy@web03.example.com:22", ("linux", "web"), 1),
        # host:port on the host line
        ("web-canary.example.com", "canary@web-canary.example.com:2222", ("linux", "web"), 1),
        ("db-a.example.com", "deploy@db-a.example.com:22", ("db",), 1),
        ("db-b.example.com", "deploy@db-b.example.com:22", ("db",), 1),
        # the host's ansible_ssh_user beats [all:vars] ansible_user: the same variable
        ("db-legacy", "legacy@192.0.2.10:22", ("db",), 1),
        # a stepped range; [build:vars] reaches the grandchildren, the host's capacity beats it
        ("build-01", "ci@10.1.0.5:22", ("build", "linux", "build_x86"), 4),
        ("build-03", "ci@10.1.0.5:22", ("build", "linux", "build_x86"), 4),
        # a child group's vars beat its parent's
        ("build-arm1", "arm-ci@10.2.0.7:2201", ("build", "linux", "build_arm"), 2),
    ]
    hosts = {h.name: h for h in inventory.hosts}
    assert hosts["db-a.example.com"].identity_file == "~/.ssh/db_ed25519"
    assert inventory.notes == (
        f"{FIXTURES / 'hosts.ini'}: host localhost left out: ansible_connection=local is not ssh",
    )


def test_yaml_inventory_with_nested_children_and_a_group_listed_twice() -> None:
    inventory = load_ansible(FIXTURES / "hosts.yml")
    assert [row(h) for h in inventory.hosts] == [
        ("bastion.example.net", "ops@bastion.example.net", ("ungrouped",), 1),
        ("build-01", "ci@10.1.0.5", ("build", "build_x86"), 2),
        ("build-02", "ci@10.1.0.5", ("build", "build_x86"), 2),
        # also in gpu (listed with no vars there): its vars from build_arm stay
        ("build-arm1", "arm-ci@10.2.0.7:2201", ("build", "gpu", "build_arm"), 8),
        ("gpu-a100-1", "deploy@gpu-a100-1", ("gpu",), 1),
        # a top-level group besides all is a child of all; host:port in the key
        ("stage-1.example.com", "deploy@stage-1.example.com:2200", ("staging",), 1),
    ]


def test_the_form_is_told_by_name_or_content() -> None:
    ini = (FIXTURES / "hosts.ini").read_text()
    yml = (FIXTURES / "hosts.yml").read_text()
    assert parse_ansible(ini, "inventory") == parse_ansible_ini(ini, "inventory")
    assert parse_ansible(yml, "inventory") == parse_ansible_yaml(yml, "inventory")
    assert [h.name for h in parse_ansible("h1\nh2 ansible_port=2\n", "hosts").hosts] == ["h1", "h2"]


@pytest.mark.parametrize(
    ("pattern", "expanded"),
    [
        ("web[01:03]", ["web01", "web02", "web03"]),
        ("web[1:3].example.com", ["web1.example.com", "web2.example.com", "web3.example.com"]),
        ("db-[a:c]", ["db-a", "db-b", "db-c"]),
        ("n[0:10:5]", ["n0", "n5", "n10"]),
        ("r[1:2]-[a:b]", ["r1-a", "r1-b", "r2-a", "r2-b"]),
        ("plain", ["plain"]),
    ],
)
def test_host_ranges(pattern: str, expanded: list[str]) -> None:
    assert expand_host_range(pattern) == expanded


@pytest.mark.parametrize("pattern", ["w[3:1]", "w[a:3]", "w[aa:bb]", "w[1:3:0]"])
def test_bad_host_ranges(pattern: str) -> None:
    with pytest.raises(ValueError):
        expand_host_range(pattern)


@pytest.mark.parametrize(
    ("text", "source", "line", "key", "reason"),
    [
        ("[web\nw1\n", "inv.ini", 1, None, "not a section header: [web"),
        ("[web]\nw1 ansible_port=abc\n", "inv.ini", 2, None, "host w1: ansible_port: Input should be a valid integer"),
        ("[web]\nw1 oops\n", "inv.ini", 2, None, "expected name=value after the host, got 'oops'"),
        ("[web:vars]\njust-a-word\n", "inv.ini", 2, None, "expected name=value in [web:vars]"),
        ("[web]\nw1 a='x\n", "inv.ini", 2, None, "unbalanced quotes"),
        ("[x]\nw[3:1]\n", "inv.ini", 2, None, "host w[3:1]: the range [3:1] is reversed"),
        (
            "all:\n  children:\n    web:\n      hosts:\n        w1:\n          ansible_port: abc\n",
            "inv.yml",
            6,
            "all.children.web.hosts.w1.ansible_port",
            "host w1: ansible_port: Input should be",
        ),
        (
            "all:\n  vars:\n    ansible_port: 0\n  hosts:\n    w1:\n",
            "inv.yml",
            3,
            "all.vars.ansible_port",
            "host w1: ansible_port: Input should be greater than or equal to 1",
        ),
        ("all:\n  hosts: [a, b]\n", "inv.yml", 2, "all.hosts", "hosts must be a mapping"),
        ("all:\n  host:\n    a:\n", "inv.yml", 2, "all.host", "a group holds only hosts, vars and children"),
        ("web:\n  hosts:\n    a: 3\n", "inv.yml", 3, "web.hosts.a", "a host's variables must be a mapping"),
        ("all:\n  hosts:\n    a: [\n", "inv.yml", 4, None, "while parsing a flow node expected the node content"),
        ("- a\n- b\n", "inv.yml", 1, None, "an Ansible YAML inventory is a mapping of groups"),
    ],  # fmt: skip
)
def test_invalid_inventories_name_file_line_and_key(
    text: str, source: str, line: int, key: str | None, reason: str
) -> None:
    with pytest.raises(InventoryInvalid) as info:
        parse_ansible(text, source)
    assert (info.value.source, info.value.line, info.value.key) == (source, line, key)
    assert info.value.reason.startswith(reason), info.value.reason
    assert str(info.value).startswith(f"{source}:{line}: invalid inventory")


def test_ssh_args_become_ssh_options_and_what_cannot_is_noted() -> None:
    from hostinv import parse_ansible

    text = (
        "[web]\n"
        "web1 ansible_host=10.0.0.5 ansible_ssh_common_args='-o ProxyJump=jump@10.0.0.9:2222 "
        '-o "ProxyCommand=nc %h %p" -A\' ansible_ssh_extra_args="-oServerAliveInterval=5 -i /keys/k"\n'
    )
    inventory = parse_ansible(text, "hosts.ini")
    (host,) = inventory.hosts
    assert host.ssh_options == {
        "ProxyJump": "jump@10.0.0.9:2222",
        "ServerAliveInterval": "5",
        "IdentityFile": "/keys/k",
    }
    assert inventory.notes == (
        "hosts.ini: host web1: ansible_ssh_common_args: the ssh option ProxyCommand runs a local program: "
        "left out (only our own inventory file may set it)",
        "hosts.ini: host web1: ansible_ssh_common_args: -A not carried (only -o, -J, -p, -i and -l become ssh_options)",
    )
