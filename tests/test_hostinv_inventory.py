"""Our inventory file, and the merged view of every source with its precedence."""

from __future__ import annotations

from pathlib import Path

import pytest

from hostinv import (
    Host,
    Inventory,
    InventoryInvalid,
    InventoryUnreadable,
    load_ansible,
    load_inventory,
    load_ssh_config,
    merge,
)
from hostinv.inventory import INVENTORY_ENV, dump_inventory_yaml, parse_inventory_yaml, write_text

FIXTURES = Path(__file__).parent / "fixtures" / "inventory"


def test_own_file_defaults_merge_into_every_host() -> None:
    parsed = parse_inventory_yaml((FIXTURES / "inventory.yaml").read_text(), "inv.yaml")
    hosts = {h.name: h for h in parsed.inventory.hosts}
    assert [h.name for h in parsed.inventory.hosts] == ["build-01", "build-arm1", "legacy-box", "sandbox"]
    assert hosts["build-01"].capacity == 4
    assert hosts["build-01"].labels == {"site": "fra1", "arch": "x86_64"}
    assert hosts["build-arm1"].labels == {"site": "ams2", "arch": "aarch64"}
    assert hosts["build-arm1"].user == "arm-ci"
    assert hosts["sandbox"].destination == "ci@sandbox"
    assert hosts["sandbox"].identity_file == "~/.ssh/ci_ed25519"
    assert hosts["sandbox"].capacity == 1
    assert "capacity" not in hosts["sandbox"].fields_set  # left to a lower source or the default
    assert hosts["legacy-box"].ssh_options == {"HostKeyAlgorithms": "+ssh-rsa"}
    assert parsed.ansible == ("ansible/hosts.ini",)


def test_an_empty_file_is_an_empty_inventory() -> None:
    assert parse_inventory_yaml("", "x").inventory == Inventory()
    assert parse_inventory_yaml("# nothing yet\n", "x").inventory == Inventory()


@pytest.mark.parametrize(
    ("text", "line", "key", "reason"),
    [
        ("hosts:\n  a:\n    port: 0\n", 3, "hosts.a.port", "Input should be greater than or equal to 1"),
        ("hosts:\n  a:\n    prot: 22\n", 3, "hosts.a.prot", "Extra inputs are not permitted"),
        ("defaults:\n  port: x\nhosts:\n  a:\n", 2, "defaults.port", "Input should be a valid integer"),
        ("defaults:\n  capacity: 0\nhosts:\n  a:\n", 2, "defaults.capacity", "Input should be greater than or equal"),
        ("hosts:\n  ok:\n  -bad:\n", 3, "hosts", "the host name '-bad' must be printable"),
        ("hosts:\n  a:\n    groups: build\n", 3, "hosts.a.groups", "Input should be a valid list"),
        ("hosts:\n  a:\n    labels:\n      - x\n", 3, "hosts.a.labels", "Input should be a valid dictionary"),
        ("hosts: [a\n", 2, None, "while parsing a flow sequence"),
        ("hosts:\n\ta: 1\n", 2, None, "while scanning for the next token found character '\\t'"),
        ("[1, 2]\n", None, None, "the file must be a mapping"),
    ],
)
def test_invalid_own_file_names_line_and_key(text: str, line: int | None, key: str | None, reason: str) -> None:
    with pytest.raises(InventoryInvalid) as info:
        parse_inventory_yaml(text, "inv.yaml")
    assert (info.value.line, info.value.key) == (line, key)
    assert info.value.reason.startswith(reason), info.value.reason


def test_dump_writes_what_parse_reads_back() -> None:
    inventory = Inventory(
        hosts=(
            Host(name="b1", address="10.0.0.1", port=2201, groups=("build",), labels={"arch": "arm"}, capacity=3),
            Host(name="b2", sources=("somewhere",)),
            Host(name="b3", ssh_options={"ProxyJump": "bastion"}, identity_file="~/.ssh/k"),
        )
    )
    text = dump_inventory_yaml(inventory, header="imported from x\n")
    assert text.startswith("# imported from x\n")
    back = parse_inventory_yaml(text, "f").inventory
    assert [h.replace(sources=()) for h in back.hosts] == [h.replace(sources=()) for h in inventory.hosts]


def test_merge_precedence_field_by_field() -> None:
    own = Inventory(hosts=(Host(name="b1", capacity=4, labels={"a": "own"}, groups=("x",), sources=("own",)),))
    ansible = Inventory(
        hosts=(
            Host(name="a9", user="ans", sources=("ans",)),
            Host(
                name="b1", user="ans", capacity=2, labels={"a": "ans", "b": "ans"}, groups=("y", "x"), sources=("ans",)
            ),
        ),
        notes=("ansible note",),
    )
    ssh = Inventory(
        hosts=(Host(name="b1", address="b1.lan", user="ssh", ssh_options={"ProxyJump": "j"}, sources=("ssh",)),),
        notes=("ssh note",),
    )
    merged = merge([own, ansible, ssh])
    assert [h.name for h in merged.hosts] == ["b1", "a9"]
    b1 = merged.hosts[0]
    assert (b1.capacity, b1.user, b1.address) == (4, "ans", "b1.lan")
    assert b1.labels == {"a": "own", "b": "ans"}
    assert b1.groups == ("x", "y")
    assert b1.ssh_options == {"ProxyJump": "j"}
    assert b1.sources == ("own", "ans", "ssh")
    assert merged.notes == ("ansible note", "ssh note")


def home_with_ssh_config(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / ".ssh" / "config.d").mkdir(parents=True)
    for path in (FIXTURES / "ssh").rglob("*"):
        if path.is_file():
            (home / ".ssh" / path.relative_to(FIXTURES / "ssh")).write_text(path.read_text())
    return home


def test_load_inventory_merges_own_file_its_ansible_and_the_ssh_config(tmp_path: Path) -> None:
    home = home_with_ssh_config(tmp_path)
    inventory = load_inventory(FIXTURES / "inventory.yaml", home=home)
    names = [h.name for h in inventory.hosts]
    # ours first, then Ansible's (named by our file, relative to it), then ssh_config's
    assert names[:4] == ["build-01", "build-arm1", "legacy-box", "sandbox"]
    assert names[4:6] == ["bastion.example.net", "web01.example.com"]
    assert names[-5:] == ["gpu-a100-1", "gpu-a100-2", "mac-mini-7", "bastion", "build-02"]
    hosts = {h.name: h for h in inventory.hosts}
    # build-01 is in all three: our capacity, Ansible's address and groups added; what the
    # ssh_config says is shown, never an override (ssh reads it itself)
    b1 = hosts["build-01"]
    assert b1.capacity == 4
    assert b1.user == "ci"
    assert b1.address == "10.1.0.5"
    assert b1.groups == ("build", "fast", "linux", "build_x86")
    assert b1.ssh_options == {}
    assert b1.from_ssh_config["address"] == "build-01.farm.internal"
    assert b1.sources == (
        str(FIXTURES / "inventory.yaml"),
        str(FIXTURES / "ansible/hosts.ini"),
        str(home / ".ssh/config"),
    )
    # legacy-box: our option is an override; the ssh_config's port is shown
    assert hosts["legacy-box"].port is None
    assert hosts["legacy-box"].from_ssh_config["port"] == "2222"
    assert hosts["legacy-box"].ssh_options == {"HostKeyAlgorithms": "+ssh-rsa"}
    assert len(names) == len(set(names))
    assert any("Match block not shown" in note for note in inventory.notes)
    assert any("ansible_connection=local" in note for note in inventory.notes)


def test_where_our_file_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(INVENTORY_ENV, raising=False)
    # no file at the default place and no ssh config: an empty inventory, not an error
    assert load_inventory(home=home) == Inventory()
    default = tmp_path / "xdg" / "remote-acp" / "inventory.yaml"
    write_text(default, "hosts:\n  from-default:\n")
    assert [h.name for h in load_inventory(home=home).hosts] == ["from-default"]
    elsewhere = tmp_path / "other.yaml"
    elsewhere.write_text("hosts:\n  from-env:\n")
    monkeypatch.setenv(INVENTORY_ENV, str(elsewhere))
    assert [h.name for h in load_inventory(home=home).hosts] == ["from-env"]
    explicit = tmp_path / "explicit.yaml"
    explicit.write_text("hosts:\n  from-option:\n")
    assert [h.name for h in load_inventory(explicit, home=home).hosts] == ["from-option"]


def test_a_named_file_must_exist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InventoryUnreadable, match="cannot read"):
        load_inventory(tmp_path / "missing.yaml", home=tmp_path)
    monkeypatch.setenv(INVENTORY_ENV, str(tmp_path / "missing-too.yaml"))
    with pytest.raises(InventoryUnreadable, match="missing-too.yaml: cannot read"):
        load_inventory(home=tmp_path)
    with pytest.raises(InventoryUnreadable):
        load_inventory(FIXTURES / "inventory.yaml", ssh_config=tmp_path / "no-config", home=tmp_path)


def test_a_file_that_is_not_utf8_is_unreadable(tmp_path: Path) -> None:
    bad = tmp_path / "inv.yaml"
    bad.write_bytes(b"hosts:\n  caf\xe9:\n")
    with pytest.raises(InventoryUnreadable, match="not UTF-8"):
        load_inventory(bad, use_ssh_config=False)


def test_write_where_a_file_stands_in_the_path_is_unreadable(tmp_path: Path) -> None:
    (tmp_path / "not-a-dir").write_text("")
    with pytest.raises(InventoryUnreadable, match="cannot write"):
        write_text(tmp_path / "not-a-dir" / "inv.yaml", "hosts:\n")
    assert [p.name for p in tmp_path.iterdir()] == ["not-a-dir"]


def test_loaders_take_str_paths_as_well_as_paths(tmp_path: Path) -> None:
    home = home_with_ssh_config(tmp_path)
    as_paths = load_inventory(FIXTURES / "inventory.yaml", home=home, keep_in=tmp_path / "kept")
    as_strs = load_inventory(str(FIXTURES / "inventory.yaml"), home=str(home), keep_in=str(tmp_path / "kept2"))
    assert as_strs == as_paths
    # The same file named either way is the same kept entry.
    assert load_inventory(str(FIXTURES / "inventory.yaml"), home=str(home), keep_in=str(tmp_path / "kept")) == as_paths
    ansible = str(FIXTURES / "ansible" / "hosts.ini")
    # One str is one path, not a sequence of one-letter paths.
    one = load_inventory(ansible=ansible, use_ssh_config=False, home=str(tmp_path / "nohome"))
    assert one == load_inventory(ansible=[Path(ansible)], use_ssh_config=False, home=tmp_path / "nohome")
    assert one.hosts
    assert load_ansible(ansible) == load_ansible(Path(ansible))
    config = str(home / ".ssh" / "config")
    assert load_ssh_config(config, include_dir=str(home / ".ssh")) == load_ssh_config(
        Path(config), include_dir=home / ".ssh"
    )
