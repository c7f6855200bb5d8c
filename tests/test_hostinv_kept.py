"""The merged inventory kept on disk: reused while its files are unchanged, read again when not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from hostinv import Inventory, InventoryInvalid, load_inventory

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home" / ".ssh").mkdir(parents=True)
    return tmp_path / "home"


def load(own: Path, home: Path, keep: Path, **more: object) -> Inventory:
    return load_inventory(own, home=home, keep_in=keep, **more)  # type: ignore[arg-type]


def entries(keep: Path) -> list[Path]:
    return sorted(keep.glob("*.json"))


def tamper(keep: Path) -> None:
    """Rename every kept host, so that a load answered from the entry shows it."""
    for path in entries(keep):
        entry = json.loads(path.read_text())
        for host in entry["hosts"]:
            host["name"] = "kept-" + host["name"]
        path.write_text(json.dumps(entry))


def names(inventory: Inventory) -> list[str]:
    return [h.name for h in inventory.hosts]


def test_a_kept_inventory_is_the_same_view_with_what_each_source_set(tmp_path: Path, home: Path) -> None:
    own = tmp_path / "inventory.yaml"
    own.write_text("defaults:\n  user: ci\nhosts:\n  b1:\n    capacity: 4\n    labels: {arch: arm}\n  b2:\n")
    (home / ".ssh" / "config").write_text("Host b2 c1\n  Port 2200\nMatch host x\n  User y\n")
    keep = tmp_path / "kept"
    first = load(own, home, keep)
    assert len(entries(keep)) == 1
    again = load(own, home, keep)
    assert again == first
    assert again.notes == first.notes != ()  # the note about Match
    assert [h.fields_set for h in again.hosts] == [h.fields_set for h in first.hosts]
    assert "capacity" not in again.get("b2").fields_set  # type: ignore[union-attr]
    assert again.get("b2").port is None  # type: ignore[union-attr]  # the ssh_config's: shown, not an override
    assert again.get("b2").from_ssh_config == {"port": "2200"}  # type: ignore[union-attr]


def test_an_unchanged_file_is_not_read_again_and_a_changed_one_is(tmp_path: Path, home: Path) -> None:
    own = tmp_path / "inventory.yaml"
    own.write_text("hosts:\n  b1:\n")
    keep = tmp_path / "kept"
    load(own, home, keep)
    tamper(keep)
    os.utime(own, (0, 0))  # touched, not changed: the contents decide
    assert names(load(own, home, keep)) == ["kept-b1"]
    own.write_text("hosts:\n  b1:\n  b2:\n")
    assert names(load(own, home, keep)) == ["b1", "b2"]


def test_a_file_that_appears_where_none_was_is_read(tmp_path: Path, home: Path) -> None:
    # The default ssh_config did not exist when the view was kept.
    own = tmp_path / "inventory.yaml"
    own.write_text("hosts:\n  b1:\n")
    keep = tmp_path / "kept"
    load(own, home, keep)
    tamper(keep)
    assert names(load(own, home, keep)) == ["kept-b1"]
    (home / ".ssh" / "config").write_text("Host c1\n")
    assert names(load(own, home, keep)) == ["b1", "c1"]


def test_include_files_and_their_patterns_are_followed(tmp_path: Path, home: Path) -> None:
    (home / ".ssh" / "config").write_text("Include conf.d/*.conf\n")
    (home / ".ssh" / "conf.d").mkdir()
    (home / ".ssh" / "conf.d" / "a.conf").write_text("Host a1\n")
    own = tmp_path / "inventory.yaml"
    own.write_text("hosts: {}\n")
    keep = tmp_path / "kept"
    assert names(load(own, home, keep)) == ["a1"]
    tamper(keep)
    assert names(load(own, home, keep)) == ["kept-a1"]
    (home / ".ssh" / "conf.d" / "b.conf").write_text("Host b1\n")  # the pattern matches one more
    assert names(load(own, home, keep)) == ["a1", "b1"]
    tamper(keep)
    (home / ".ssh" / "conf.d" / "a.conf").write_text("Host a2\n")  # an included file changed
    assert names(load(own, home, keep)) == ["a2", "b1"]


def test_an_ansible_inventory_our_file_names_is_followed(tmp_path: Path, home: Path) -> None:
    own = tmp_path / "inventory.yaml"
    own.write_text("ansible: [hosts.ini]\n")
    ini = tmp_path / "hosts.ini"
    ini.write_text("[web]\nw1\n")
    keep = tmp_path / "kept"
    assert names(load(own, home, keep)) == ["w1"]
    ini.write_text("[web]\nw1\nw2\n")
    assert names(load(own, home, keep)) == ["w1", "w2"]


def test_each_way_of_loading_is_kept_apart(tmp_path: Path, home: Path) -> None:
    own = tmp_path / "inventory.yaml"
    own.write_text("hosts:\n  b1:\n")
    (home / ".ssh" / "config").write_text("Host c1\n")
    keep = tmp_path / "kept"
    assert names(load(own, home, keep)) == ["b1", "c1"]
    assert names(load(own, home, keep, use_ssh_config=False)) == ["b1"]
    assert len(entries(keep)) == 2


def test_an_invalid_file_is_an_error_every_time_and_is_not_kept(tmp_path: Path, home: Path) -> None:
    own = tmp_path / "inventory.yaml"
    own.write_text("hosts:\n  b1:\n    port: 0\n")
    keep = tmp_path / "kept"
    for _ in range(2):
        with pytest.raises(InventoryInvalid, match="hosts.b1.port"):
            load(own, home, keep)
    assert entries(keep) == []


@pytest.mark.parametrize(
    "damage", ["", "{", '{"version": 1}', '{"version": 1, "files": {}, "globs": {}, "hosts": [1]}']
)
def test_a_damaged_entry_is_a_miss(tmp_path: Path, home: Path, damage: str) -> None:
    own = tmp_path / "inventory.yaml"
    own.write_text("hosts:\n  b1:\n")
    keep = tmp_path / "kept"
    load(own, home, keep)
    (entry,) = entries(keep)
    entry.write_text(damage)
    assert names(load(own, home, keep)) == ["b1"]
    assert json.loads(entry.read_text())["hosts"][0]["name"] == "b1"  # written again


def test_a_directory_that_cannot_be_written_only_costs_the_reuse(tmp_path: Path, home: Path) -> None:
    own = tmp_path / "inventory.yaml"
    own.write_text("hosts:\n  b1:\n")
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert names(load(own, home, blocked / "kept")) == ["b1"]


def test_a_kept_inventory_loads_neither_yaml_nor_pydantic(tmp_path: Path, home: Path) -> None:
    own = tmp_path / "inventory.yaml"
    own.write_text("hosts:\n  b1:\n    address: 10.0.0.1\n")
    (home / ".ssh" / "config").write_text("Host c1\n  User ci\n")
    keep = tmp_path / "kept"
    program = (
        "import sys\n"
        "from pathlib import Path\n"
        "from hostinv import load_inventory\n"
        f"view = load_inventory(Path({str(own)!r}), home=Path({str(home)!r}), keep_in=Path({str(keep)!r}))\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('yaml', 'pydantic', 'pydantic_core'))\n"
        "print([h.destination for h in view.hosts], heavy)\n"
    )
    run = [sys.executable, "-c", program]
    cold = subprocess.run(run, capture_output=True, text=True, check=True, timeout=60).stdout
    warm = subprocess.run(run, capture_output=True, text=True, check=True, timeout=60).stdout
    assert cold.startswith("['10.0.0.1', 'c1'] ['pydantic")  # read and validated; c1 by its alias
    assert warm == "['10.0.0.1', 'c1'] []\n"
