"""Which ``run --host`` values are placed through the inventory, and which stay ssh destinations."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
import pytest

from remote_acp.cli.placement import fleet_hosts

if TYPE_CHECKING:
    from pathlib import Path

INVENTORY = """\
hosts:
  build-1: {address: 10.0.0.1, user: ci, capacity: 3, groups: [build]}
  build-2: {address: 10.0.0.2, groups: [build]}
  gpu-1: {address: 10.0.0.9}
"""


@pytest.fixture
def inventory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "inventory.yaml"
    path.write_text(INVENTORY)
    monkeypatch.setenv("REMOTE_ACP_INVENTORY", str(path))
    return path


def names(text: str, inventory_file: str | None = None) -> list[str] | None:
    hosts = fleet_hosts(text, inventory_file, "none")
    return None if hosts is None else [h.name for h in hosts]


def test_a_group_or_a_glob_selects_inventory_hosts(inventory: Path) -> None:
    assert names("@build") == ["build-1", "build-2"]
    assert names("*-1") == ["build-1", "gpu-1"]


def test_an_inventory_host_name_is_placed_with_its_capacity(inventory: Path) -> None:
    hosts = fleet_hosts("build-1", None, None)
    assert hosts is not None and [(h.destination, h.capacity) for h in hosts] == [("ci@10.0.0.1", 3)]


def test_anything_else_is_a_destination_as_given(inventory: Path) -> None:
    assert names("ci@10.0.0.1:2222") is None
    assert names("elsewhere") is None


def test_without_an_inventory_file_a_name_is_a_destination(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "empty"))
    monkeypatch.delenv("REMOTE_ACP_INVENTORY", raising=False)
    assert names("build-1") is None


def test_a_selection_that_matches_nothing_is_a_usage_error(inventory: Path) -> None:
    with pytest.raises(click.UsageError, match="no host is in the group 'nowhere' \\(groups: @build\\)"):
        names("@nowhere")


def test_an_inventory_named_on_the_command_line_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REMOTE_ACP_INVENTORY", raising=False)
    path = tmp_path / "other.yaml"
    path.write_text(INVENTORY)
    assert names("gpu-1", str(path)) == ["gpu-1"]


def test_a_named_host_is_read_from_the_kept_inventory_until_its_file_changes(inventory: Path) -> None:
    # `run --host build-1` keeps the inventory as fleet commands do: the next run starts without
    # YAML and pydantic, and an edit is seen at once.
    import os
    from pathlib import Path

    first = fleet_hosts("build-1", None, None)
    assert first is not None and first[0].capacity == 3
    assert len(list((Path(os.environ["REMOTE_ACP_CACHE_DIR"]) / "inventory").glob("*.json"))) == 1
    inventory.write_text(INVENTORY.replace("capacity: 3", "capacity: 5"))
    again = fleet_hosts("build-1", None, None)
    assert again is not None and again[0].capacity == 5
