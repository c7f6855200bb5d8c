"""Hostile inventories: expansions that would never end or fill memory are refused, quickly and
in little memory, as an :class:`InventoryInvalid` naming the file and the line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest

from hostinv import InventoryInvalid, InventoryUnreadable, parse_ansible
from hostinv.inventory.ansible import MAX_HOSTS, expand_host_range
from hostinv.inventory.yaml_text import MAX_EXPANDED_NODES

if TYPE_CHECKING:
    from pathlib import Path

RANGES_32_BYTES = "h[0:99][0:99][0:99][0:99] a=b\n"  # 10^8 hosts


def laughs(levels: int) -> str:
    """A billion-laughs tree in an Ansible YAML inventory: each level aliases the one below 9 times."""
    names = "abcdefghi"
    rows = ["a: &a [x,x,x,x,x,x,x,x,x]"]
    rows += [f"{names[i]}: &{names[i]} [" + ",".join([f"*{names[i - 1]}"] * 9) + "]" for i in range(1, levels)]
    body = "".join(f"    {row}\n" for row in rows)
    return f"all:\n  vars:\n{body}  hosts:\n    h:\n      ansible_host: *{names[levels - 1]}\n"


LAUGHS = laughs(9)  # 9^9 leaves in under 400 bytes


MEASURE = """
import json, sys, tracemalloc
from hostinv import parse_ansible
from hostinv.inventory import parse_inventory_yaml
parse = parse_inventory_yaml if sys.argv[2] == "own" else parse_ansible
tracemalloc.start()
try:
    parse(sys.stdin.read(), sys.argv[1])
    out = {"error": None}
except Exception as exc:
    out = {"error": type(exc).__name__, "line": exc.line, "message": str(exc)}
out["peak"] = tracemalloc.get_traced_memory()[1]
print(json.dumps(out))
"""


def measured(text: str, source: str, parser: str = "ansible") -> dict[str, Any]:
    """Parse ``text`` in a child process: what it raised, and the peak of memory it allocated."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, source, parser],
        input=text,
        capture_output=True,
        text=True,
        timeout=10,  # a hang guard only: the refusals take milliseconds
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


SMALL = 16 * 1024 * 1024


def test_the_32_byte_range_bomb_is_refused_at_once() -> None:
    assert len(RANGES_32_BYTES) <= 32
    out = measured(RANGES_32_BYTES, "hosts.ini")
    assert out["error"] == "InventoryInvalid" and out["line"] == 1
    assert out["message"].startswith("hosts.ini:1: invalid inventory: host h[0:99][0:99][0:99][0:99]:")
    assert f"over {MAX_HOSTS} hosts" in out["message"]
    assert out["peak"] < SMALL


def test_the_billion_laughs_yaml_is_refused_before_anything_walks_it() -> None:
    assert len(LAUGHS) < 400
    out = measured(LAUGHS, "inv.yml")
    assert out["error"] == "InventoryInvalid"
    assert out["message"].startswith(f"inv.yml:{out['line']}: invalid inventory:")
    assert f"with its aliases expanded, this value holds over {MAX_EXPANDED_NODES} nodes" in out["message"]
    assert 3 <= out["line"] <= 11  # an anchored level of the tree, not the whole file
    assert out["peak"] < SMALL


def test_the_billion_laughs_through_merge_keys_is_refused() -> None:
    """pyyaml flattens ``<<`` merges into real lists of pairs: the tree is built unless refused first."""
    rows = ["m0: &m0 {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8, i: 9}"]
    rows += [f"m{i}: &m{i} {{<<: [" + ", ".join([f"*m{i - 1}"] * 9) + "]}" for i in range(1, 9)]
    text = "all:\n  vars:\n" + "".join(f"    {row}\n" for row in rows)
    out = measured(text, "merge.yml")
    assert out["error"] == "InventoryInvalid" and "aliases expanded" in out["message"]
    assert out["peak"] < SMALL


def test_our_own_file_refuses_the_billion_laughs_too() -> None:
    text = "defaults:\n  labels: &l\n    k: v\nhosts:\n  h:\n    address: &a0 [x,x,x,x,x,x,x,x,x]\n"
    text += "".join(f"    groups{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]\n" for i in range(1, 9))
    out = measured(text, "own.yml", "own")
    assert out["error"] == "InventoryInvalid" and "aliases expanded" in out["message"]
    assert out["peak"] < SMALL


def test_an_aliased_list_as_a_host_field_is_refused_before_it_becomes_text() -> None:
    with pytest.raises(InventoryInvalid) as info:
        parse_ansible(laughs(3), "inv.yml")  # small enough for the expansion bound
    assert (info.value.line, info.value.key) == (8, "all.hosts.h.ansible_host")
    assert info.value.reason == "host h: ansible_host: a single value is expected, not a list"
    text = "all:\n  vars:\n    ansible_user: {a: 1}\n    ansible_connection: [ssh]\n  hosts:\n    h:\n"
    with pytest.raises(InventoryInvalid, match="ansible_connection: a single value is expected, not a list"):
        parse_ansible(text, "inv.yml")
    with pytest.raises(InventoryInvalid) as info:
        parse_ansible(text.replace("    ansible_connection: [ssh]\n", ""), "inv.yml")
    assert info.value.line == 3 and info.value.reason.endswith("not a mapping")


def test_other_variables_may_be_lists_and_aliases_still_work() -> None:
    """Ansible's own variables may hold anything; only what becomes a host's field must be a scalar."""
    text = (
        "all:\n  vars:\n    packages: &pkgs [git, make]\n    common: &common {ansible_user: ci}\n"
        "  hosts:\n    h1:\n      <<: *common\n      extra: *pkgs\n    h2:\n      <<: *common\n"
    )
    hosts = parse_ansible(text, "inv.yml").hosts
    assert [(h.name, h.user) for h in hosts] == [("h1", "ci"), ("h2", "ci")]


def test_an_alias_inside_its_own_anchor_is_refused() -> None:
    with pytest.raises(InventoryInvalid) as info:
        parse_ansible("all:\n  vars:\n    loop: &a [x, *a]\n", "inv.yml")
    assert info.value.line == 3 and "an alias refers to a value that contains it" in info.value.reason


def test_nesting_deeper_than_the_parser_can_follow_is_refused() -> None:
    with pytest.raises(InventoryInvalid) as info:
        parse_ansible("all:\n  vars:\n    deep: " + "[" * 600 + "]" * 600 + "\n", "deep.yml")
    assert str(info.value) == "deep.yml: invalid inventory: the document is nested too deeply to read"


def test_a_range_is_sized_before_it_is_built() -> None:
    assert len(expand_host_range(f"h[1:{MAX_HOSTS}]")) == MAX_HOSTS
    assert expand_host_range("n[08:10]-[a:b]") == ["n08-a", "n08-b", "n09-a", "n09-b", "n10-a", "n10-b"]
    for pattern in (f"h[0:{MAX_HOSTS}]", "h[0:99999999999999999999]", "h[0:9][0:9][0:9][0:9][0:9]"):
        with pytest.raises(ValueError, match=f"over {MAX_HOSTS} hosts"):
            expand_host_range(pattern)
    assert expand_host_range("h[0:9][0:9][0:9][0:9][0:9]", limit=100_000)[-1] == "h99999"


def test_a_file_naming_too_many_hosts_is_refused_at_the_line_that_passes_the_bound() -> None:
    text = "[a]\nh[0:5999]\n[b]\ng[0:5999]\n"
    with pytest.raises(InventoryInvalid) as info:
        parse_ansible(text, "hosts.ini")
    assert info.value.line == 4 and info.value.reason == f"the file names over {MAX_HOSTS} hosts"
    yml = "a:\n  hosts:\n    h[0:5999]:\nb:\n  hosts:\n    g[0:5999]:\n"
    with pytest.raises(InventoryInvalid) as info:
        parse_ansible(yml, "inv.yml")
    assert (info.value.line, info.value.key) == (6, "b.hosts.g[0:5999]")


def test_the_same_hosts_listed_in_many_groups_are_bounded_too() -> None:
    text = "".join(f"[g{i}]\nh[0:9999]\n" for i in range(11))
    out = measured(text, "hosts.ini")
    assert out["error"] == "InventoryInvalid" and out["line"] == 22
    assert out["message"].endswith("the file lists over 100000 host entries")


def test_groups_that_are_their_own_ancestors_are_refused() -> None:
    with pytest.raises(InventoryInvalid, match="their own ancestors through children: a, b"):
        parse_ansible("[a:children]\nb\n[b:children]\na\n[a]\nh\n", "hosts.ini")


def test_an_inventory_file_is_read_within_a_bound_and_only_when_regular(tmp_path: Path) -> None:
    from hostinv.inventory.load import MAX_INVENTORY_BYTES, read_text

    big = tmp_path / "big.yaml"
    with big.open("wb") as file:
        file.truncate(MAX_INVENTORY_BYTES + 1)  # sparse: no disk, all the bytes
    with pytest.raises(InventoryUnreadable, match="larger than 16 MiB"):
        read_text(big)
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)  # nobody writes: an open that waited would never return
    with pytest.raises(InventoryUnreadable, match="not a regular file"):
        read_text(fifo)
    with pytest.raises(InventoryUnreadable, match="not a regular file"):
        read_text("/dev/zero")


def test_a_host_named_twice_in_the_yaml_is_refused_at_its_second_line(tmp_path: Path) -> None:
    from hostinv import load_inventory

    own = tmp_path / "inventory.yaml"
    own.write_text("hosts:\n  b1:\n    address: 10.0.0.1\n  b2: {}\n  b1:\n    address: 10.0.0.9\n")
    with pytest.raises(InventoryInvalid) as info:
        load_inventory(own, use_ssh_config=False)
    assert "the key 'b1' is given twice (lines 2 and 5): say it once" in str(info.value)
    assert str(own) in str(info.value) and ":5" in str(info.value)


def test_a_misspelt_ssh_option_is_refused_where_it_is_written(tmp_path: Path) -> None:
    from hostinv import load_inventory

    own = tmp_path / "inventory.yaml"
    own.write_text("hosts:\n  b1:\n    ssh_options:\n      ProxyJum: bastion\n")
    with pytest.raises(InventoryInvalid) as info:
        load_inventory(own, use_ssh_config=False)
    said = str(info.value)
    assert "'ProxyJum' is not an ssh_config keyword: did you mean ProxyJump?" in said
    assert str(own) in said and ":3" in said  # the line of ssh_options
    own.write_text("hosts:\n  b1:\n    ssh_options:\n      proxyjump: bastion\n      SomeFutureOption: x\n")
    (host,) = load_inventory(own, use_ssh_config=False).hosts  # any case; a keyword unknown here is ssh's to judge
    assert host.ssh_options == {"proxyjump": "bastion", "SomeFutureOption": "x"}


# -- ssh_config: every alias against its own blocks, and what Include may fan out to --------------


def test_each_alias_visits_its_own_blocks_and_the_wildcard_ones_not_every_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hostinv import parse_ssh_config
    from hostinv.inventory import ssh_config

    count = 2_000
    text = "".join(f"Host h{i}\n  HostName 10.0.{i // 256}.{i % 256}\n" for i in range(count))
    text += "Host h1? !h13\n  Port 2200\nHost *\n  User everyone\n  Port 22\n"
    visits = 0
    match = ssh_config._Patterns.match

    def counted(self: Any, alias: str) -> bool:
        nonlocal visits
        visits += 1
        return match(self, alias)

    monkeypatch.setattr(ssh_config._Patterns, "match", counted)
    hosts = {h.name: h.from_ssh_config for h in parse_ssh_config(text, "cfg").hosts}
    assert len(hosts) == count
    # Its own block, then the two with wildcards, in file order (first value wins, as in ssh)
    assert visits <= 3 * count
    assert hosts["h0"] == {"address": "10.0.0.0", "user": "everyone", "port": "22"}
    assert hosts["h12"] == {"address": "10.0.0.12", "port": "2200", "user": "everyone"}
    assert hosts["h13"]["port"] == "22"  # negated in the earlier block


def _levels(root: Path, depth: int, fan_out: int) -> None:
    """Directories l1..l{depth}, each of ``fan_out`` files that include every file of the next."""
    for level in range(1, depth + 1):
        (root / f"l{level}").mkdir()
        body = f"Include {root}/l{level + 1}/*\n" if level < depth else "Host leaf\n"
        for i in range(fan_out):
            (root / f"l{level}" / f"f{i}").write_text(body)


def test_include_fan_out_is_bounded_naming_the_file_and_line(tmp_path: Path) -> None:
    from hostinv import load_ssh_config
    from hostinv.inventory.ssh_config import MAX_INCLUDED_FILES

    _levels(tmp_path, depth=5, fan_out=5)  # 3,905 files read, from a config of one line
    config = tmp_path / "config"
    config.write_text(f"# a small config\nInclude {tmp_path}/l1/*\n")
    with pytest.raises(InventoryInvalid) as info:
        load_ssh_config(config, include_dir=tmp_path)
    assert f"the config includes over {MAX_INCLUDED_FILES} files in all" in info.value.reason
    assert info.value.source.startswith(str(tmp_path / "l"))  # the file whose Include passed the bound
    assert info.value.line == 1
    # Under the bound, the same layout reads.
    config.write_text(f"Include {tmp_path}/l4/*\n")
    assert [h.name for h in load_ssh_config(config, include_dir=tmp_path).hosts] == ["leaf"]


def test_the_bytes_a_load_includes_are_bounded(tmp_path: Path) -> None:
    from hostinv import load_ssh_config
    from hostinv.inventory.ssh_config import MAX_INCLUDED_BYTES

    big = tmp_path / "big.conf"
    big.write_text(("# " + "x" * 1021 + "\n") * (MAX_INCLUDED_BYTES // 2048 + 1) + "Host big\n")
    config = tmp_path / "config"
    config.write_text("Include big.conf\n")
    assert [h.name for h in load_ssh_config(config, include_dir=tmp_path).hosts] == ["big"]
    config.write_text("Host first\n\nInclude big.conf big.conf\n")
    with pytest.raises(InventoryInvalid, match="includes over 16 MiB in all") as info:
        load_ssh_config(config, include_dir=tmp_path)
    assert (info.value.source, info.value.line) == (str(config), 3)
