"""ssh_config Host entries as inventory hosts: ssh's first-value-wins, Include, Match, wildcards."""

from __future__ import annotations

from pathlib import Path

import pytest

from hostinv import InventoryInvalid, InventoryUnreadable, load_ssh_config, parse_ssh_config

FIXTURES = Path(__file__).parent / "fixtures" / "inventory" / "ssh"


# The fixture's Include config.d/*.conf is relative to ~/.ssh: the fixture directory stands in for it.


def test_every_alias_without_wildcards_is_a_host_in_file_order_includes_where_they_stand() -> None:
    inventory = load_ssh_config(FIXTURES / "config", include_dir=FIXTURES)
    assert [h.name for h in inventory.hosts] == [
        "gpu-a100-1", "gpu-a100-2", "mac-mini-7", "bastion", "build-01", "build-02", "legacy-box",
    ]  # fmt: skip


def test_fields_follow_ssh_first_value_wins_across_matching_blocks() -> None:
    hosts = {h.name: h for h in load_ssh_config(FIXTURES / "config", include_dir=FIXTURES).hosts}
    # %h expanded; User from the shared block beats the later specific one; Port from the later one
    assert hosts["build-01"].ssh_config_destination == "builder@build-01.farm.internal:2201"
    assert hosts["build-02"].ssh_config_destination == "builder@build-02.farm.internal"
    # Host * supplies what nothing earlier set
    assert hosts["bastion"].ssh_config_destination == "ops@bastion.example.net"
    assert hosts["bastion"].from_ssh_config["identity_file"] == "~/.ssh/ops_ed25519"
    # Keyword=value, quotes, the first IdentityFile, a port from a wildcard block of an included file
    assert hosts["legacy-box"].ssh_config_destination == "root@192.0.2.44:2222"
    assert hosts["gpu-a100-2"].ssh_config_destination == "ml@gpu.lab:2022"
    assert hosts["gpu-a100-2"].from_ssh_config["identity_file"] == "~/.ssh/gpu_ed25519"
    assert hosts["mac-mini-7"].from_ssh_config["address"] == "2001:db8::7"
    assert hosts["mac-mini-7"].ssh_config_destination == "builder@2001:db8::7"
    assert all(h.sources == (str(FIXTURES / "config"),) for h in hosts.values())


def test_a_host_of_the_ssh_config_is_reached_by_its_alias_with_no_override() -> None:
    # What the Host blocks say is shown, never passed back to ssh: no -o, -p, -l, -i, no
    # generated Host block; ssh reads the config itself, Match blocks and all.
    hosts = load_ssh_config(FIXTURES / "config", include_dir=FIXTURES).hosts
    for host in hosts:
        assert host.destination == host.name
        overrides = (host.address, host.port, host.user, host.identity_file, host.ssh_options)
        assert overrides == (None, None, None, None, {})
        assert host.fields_set == {"name", "from_ssh_config", "sources"}


def test_match_blocks_are_left_out_of_the_listing_with_a_note() -> None:
    inventory = load_ssh_config(FIXTURES / "config", include_dir=FIXTURES)
    assert inventory.notes == (
        f"{FIXTURES / 'config'}:29: Match block not shown in the listing (ssh applies it when connecting)",
    )


def test_negated_patterns_and_case_insensitive_matching() -> None:
    text = "Host Alpha beta\nHost * !beta\n  User everyone\nHost BETA\n  Port 2200\n"
    hosts = {h.name: h.from_ssh_config for h in parse_ssh_config(text, "cfg").hosts}
    assert hosts["Alpha"] == {"user": "everyone"}
    assert hosts["beta"] == {"port": "2200"}


def test_include_is_followed_by_the_reader_and_noted_without_one() -> None:
    calls: list[str] = []

    def read(pattern: str) -> list[tuple[str, str]]:
        calls.append(pattern)
        return [("inc-a", "Host a1\n  Port 2001\n"), ("inc-b", "Host b1\n")]

    inventory = parse_ssh_config("Include conf.d/*\nHost z\n", "cfg", read_include=read)
    assert calls == ["conf.d/*"]
    assert [(h.name, h.from_ssh_config.get("port"), h.sources) for h in inventory.hosts] == [
        ("a1", "2001", ("cfg",)), ("b1", None, ("cfg",)), ("z", None, ("cfg",)),
    ]  # fmt: skip
    assert parse_ssh_config("Include x\n", "cfg").notes == ("cfg:1: Include x not followed",)


def test_lines_after_an_include_belong_to_the_block_around_it() -> None:
    text = "Host outer\n  Include extra\n  User after-include\n"
    inventory = parse_ssh_config(text, "cfg", read_include=lambda p: [("extra", "Host inner\n  Port 2\n")])
    hosts = {h.name: h.from_ssh_config for h in inventory.hosts}
    assert hosts == {"outer": {"user": "after-include"}, "inner": {"port": "2"}}


def test_an_include_loop_is_an_error_not_a_hang() -> None:
    with pytest.raises(InventoryInvalid, match="Include nested too deeply"):
        parse_ssh_config("Include self\n", "cfg", read_include=lambda p: [("cfg", "Include self\n")])


def test_a_missing_include_is_skipped_as_ssh_does(tmp_path: Path) -> None:
    (tmp_path / "config").write_text("Include nothing-here/*.conf\nHost a\n")
    assert [h.name for h in load_ssh_config(tmp_path / "config", include_dir=tmp_path).hosts] == ["a"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Host a\n  Port\n", "cfg:2: invalid inventory: 'Port' has no value"),
        ('Host a\n  HostName "unclosed\n', "cfg:2: invalid inventory: HostName: unbalanced quotes"),
        ("Host a\n  Port 99999\n", "cfg:2: invalid inventory: Port for Host a: Input should be less than or equal"),
        ('\n\nHost a\n  HostName "two words"\n', "cfg:4: invalid inventory: HostName for Host a: Value error"),
    ],
)
def test_invalid_lines_name_file_and_line(text: str, message: str) -> None:
    with pytest.raises(InventoryInvalid) as info:
        parse_ssh_config(text, "cfg")
    assert str(info.value).startswith(message)


def test_an_error_in_an_included_file_names_that_file(tmp_path: Path) -> None:
    (tmp_path / "bad.conf").write_text("# bad\nHost x\n  Port many\n")
    (tmp_path / "config").write_text("Include bad.conf\n")
    with pytest.raises(InventoryInvalid) as info:
        load_ssh_config(tmp_path / "config", include_dir=tmp_path)
    assert info.value.source == str(tmp_path / "bad.conf")
    assert info.value.line == 3


def test_a_missing_config_is_unreadable(tmp_path: Path) -> None:
    with pytest.raises(InventoryUnreadable, match="cannot read"):
        load_ssh_config(tmp_path / "nope")


def test_globs_negated_globs_and_brackets_as_ssh_reads_them() -> None:
    # ssh knows * and ? only: "[ab]" is three characters, not a class.
    text = (
        "Host web1 web22 db1 x[ab] xa\n"
        "Host web? !db*\n  User short\n"
        "Host * !web2*\n  Port 2222\n"
        "Host x[ab]\n  HostName bracket.example\n"
    )
    hosts = {h.name: h.from_ssh_config for h in parse_ssh_config(text, "cfg").hosts}
    assert hosts["web1"] == {"user": "short", "port": "2222"}
    assert hosts["web22"] == {}  # ? is one character; !web2* excludes
    assert hosts["db1"] == {"port": "2222"}
    assert hosts["x[ab]"] == {"address": "bracket.example", "port": "2222"} and "address" not in hosts["xa"]
