"""What an inventory may make ssh do: the user's ssh_config is applied by ssh (never overridden
by values read out of it), an Ansible file cannot name a program to run, no option opens a block
or reads a file, and no file another user could have written is read at all."""

from __future__ import annotations

import os
import socket
import subprocess
from typing import TYPE_CHECKING

import pytest

from hostinv import Host, InventoryInvalid, InventoryUnreadable, load_inventory, parse_ansible
from hostinv.inventory import parse_inventory_yaml, write_text
from hostinv.sshopts import fallback_config_text, parse_ssh_g, ssh_g_argv

if TYPE_CHECKING:
    from pathlib import Path

# ssh applies the Match block (the alias is lab1) and keeps its first value: yes.
MATCH_CONFIG = (
    "Host lab1\n"
    "  HostName 127.0.0.1\n"
    "  Port 2222\n"
    "Match originalhost lab1\n"
    "  StrictHostKeyChecking yes\n"
    "Host *\n"
    "  StrictHostKeyChecking accept-new\n"
    "  ServerAliveInterval 7\n"
)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home" / ".ssh").mkdir(parents=True)
    return tmp_path / "home"


@pytest.fixture
def no_hosts(tmp_path: Path) -> Path:
    """Our own file, with no hosts."""
    own = tmp_path / "empty.yaml"
    own.write_text("")
    return own


def _ssh_g(host: Host, config: Path, tmp_path: Path) -> str:
    """``ssh -G`` as the probe runs it for ``host``: the host's fields as command-line
    overrides, and the file that includes ``config`` before the fallback host-key policy."""
    policy = tmp_path / "policy_config"
    policy.write_text(fallback_config_text(str(config), home=str(tmp_path), by="hostinv"))
    argv = ssh_g_argv(
        host.address or host.name,
        config=str(policy),
        port=host.port,
        user=host.user,
        identity_file=host.identity_file,
        options=dict(host.ssh_options),
    )
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30).stdout


@pytest.mark.process
def test_a_match_block_of_the_users_config_applies_to_a_host_it_lists(
    tmp_path: Path, home: Path, no_hosts: Path
) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(MATCH_CONFIG)
    inventory = load_inventory(no_hosts, ssh_config=config, home=home)
    (host,) = (h for h in inventory.hosts if h.name == "lab1")
    resolved = parse_ssh_g(_ssh_g(host, config, tmp_path), home=str(home))
    assert resolved.host_key_policy == "yes"  # as `ssh lab1` applies it, not accept-new
    assert (resolved.hostname, resolved.port) == ("127.0.0.1", 2222)  # and the rest still from the config
    # The session's way: nothing to write ahead of the user's config, and the alias as destination.
    from remote_acp.fleet.check import host_config_text

    assert host_config_text(host, str(config), home=str(home)) is None
    assert host.destination == "lab1"


def test_only_our_file_and_ansible_set_overrides_of_a_host_the_ssh_config_names(tmp_path: Path, home: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(MATCH_CONFIG)
    own = tmp_path / "inventory.yaml"
    own.write_text("hosts:\n  lab1:\n    user: ci\n    ssh_options: {ServerAliveInterval: '3'}\n")
    (host,) = load_inventory(own, ssh_config=config, home=home).hosts
    assert (host.user, host.port, host.address, host.ssh_options) == ("ci", None, None, {"ServerAliveInterval": "3"})
    assert host.from_ssh_config == {"address": "127.0.0.1", "port": "2222"}
    assert host.destination == "ci@lab1"
    assert host.ssh_config_destination == "ci@127.0.0.1:2222"


# -- what an Ansible file may set ---------------------------------------------------------------


@pytest.mark.process
@pytest.mark.anyio
async def test_an_ansible_proxy_command_is_left_out_and_never_runs(tmp_path: Path, no_hosts: Path) -> None:
    from hostinv.probes import ProbeSettings, probe_host

    marker = tmp_path / "PWNED"
    with socket.socket() as sock:  # a port nothing listens on: the probe ends at once
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    hosts = tmp_path / "hosts.ini"
    hosts.write_text(
        f"lab1 ansible_host=127.0.0.1 ansible_port={port} "
        f"ansible_ssh_common_args=\"-o ProxyCommand='touch {marker}; exec false' -o KnownHostsCommand=/bin/true\"\n"
    )
    inventory = load_inventory(no_hosts, use_ssh_config=False, ansible=hosts)
    (host,) = inventory.hosts
    empty = tmp_path / "ssh_config"
    empty.write_text("")
    settings = ProbeSettings(
        ssh_config=str(empty), known_hosts=str(tmp_path / "known_hosts"), connect_timeout_s=5, command_timeout_s=5
    )
    result = await probe_host(host, "sh", "", settings)  # as `check host` probes it
    assert not result.ready
    assert not marker.exists()
    assert host.ssh_options == {}
    assert inventory.notes == tuple(
        f"{hosts}: host lab1: ansible_ssh_common_args: the ssh option {key} runs a local program: "
        "left out (only our own inventory file may set it)"
        for key in ("ProxyCommand", "KnownHostsCommand")
    )


@pytest.mark.parametrize("keyword", ["LocalCommand", "permitlocalcommand", "PKCS11Provider", "RemoteCommand"])
def test_every_keyword_that_runs_a_program_is_left_out_of_ansible(keyword: str) -> None:
    inventory = parse_ansible(f"lab1 ansible_ssh_extra_args='-o {keyword}=x -o Compression=yes'\n", "hosts.ini")
    assert inventory.hosts[0].ssh_options == {"Compression": "yes"}
    assert f"the ssh option {keyword} runs a local program" in inventory.notes[0]


def test_our_own_file_may_set_a_proxy_command() -> None:
    text = "hosts:\n  lab1:\n    ssh_options: {ProxyCommand: 'ssh -W %h:%p jump'}\n"
    (host,) = parse_inventory_yaml(text, "inventory.yaml").inventory.hosts
    assert host.ssh_options == {"ProxyCommand": "ssh -W %h:%p jump"}


@pytest.mark.parametrize("keyword", ["Match", "include", "Host"])
def test_an_option_that_opens_a_block_or_reads_a_file_is_refused_from_every_source(keyword: str) -> None:
    with pytest.raises(InventoryInvalid, match="starts a block or reads a file"):
        parse_inventory_yaml(f"hosts:\n  lab1:\n    ssh_options: {{{keyword}: 'exec \"touch x\"'}}\n", "inv.yaml")
    with pytest.raises(InventoryInvalid, match="starts a block or reads a file") as info:
        parse_ansible(f"[web]\nlab1 ansible_ssh_common_args='-o {keyword}=all'\n", "hosts.ini")
    assert info.value.line == 2
    assert "host lab1: ansible_ssh_common_args: " in str(info.value)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("{'Tag=Match': x}", "is not an ssh_config keyword"),
        ('{ServerAliveInterval: "3\\nMatch exec x"}', "holds a line break"),
    ],
)
def test_an_option_that_would_read_as_another_line_is_refused(options: str, message: str) -> None:
    with pytest.raises(InventoryInvalid, match=message):
        parse_inventory_yaml(f"hosts:\n  lab1:\n    ssh_options: {options}\n", "inv.yaml")


# -- who may have written the files -------------------------------------------------------------


def _own(tmp_path: Path) -> Path:
    own = tmp_path / "inv" / "inventory.yaml"
    own.parent.mkdir(mode=0o700)
    own.write_text("hosts:\n  lab1:\n    ssh_options: {ProxyCommand: 'touch x'}\n")
    own.chmod(0o644)
    return own


@pytest.mark.parametrize("mode", [0o666, 0o646, 0o664])
def test_an_inventory_file_others_can_write_is_refused(tmp_path: Path, mode: int) -> None:
    own = _own(tmp_path)
    assert load_inventory(own, use_ssh_config=False).hosts[0].name == "lab1"
    own.chmod(mode)
    with pytest.raises(InventoryUnreadable, match=rf"{own} is writable by other users \(mode 0{mode:o}\)"):
        load_inventory(own, use_ssh_config=False)


def test_an_inventory_in_a_directory_others_can_write_is_refused(tmp_path: Path) -> None:
    own = _own(tmp_path)
    own.parent.chmod(0o777)
    with pytest.raises(InventoryUnreadable, match=r"inv, above .* is writable by other users \(mode 0777\)"):
        load_inventory(own, use_ssh_config=False)
    own.parent.chmod(0o1777)  # sticky, as /tmp: no one renames there what they do not own
    assert load_inventory(own, use_ssh_config=False).hosts[0].name == "lab1"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user takes root")
def test_a_file_of_another_user_is_refused_one_of_root_is_not(tmp_path: Path) -> None:
    own = _own(tmp_path)
    os.chown(own, 0, 0)
    assert load_inventory(own, use_ssh_config=False).hosts[0].name == "lab1"
    os.chown(own, 65534, 65534)
    with pytest.raises(InventoryUnreadable, match=r"belongs to uid 65534, neither this user \(uid 0\) nor root"):
        load_inventory(own, use_ssh_config=False)
    os.chown(own, 0, 0)
    os.chown(own.parent, 65534, 65534)
    with pytest.raises(InventoryUnreadable, match=r"belongs to uid 65534, who could replace it"):
        load_inventory(own, use_ssh_config=False)


def test_every_file_read_is_checked_the_ansible_files_and_the_included_ones(
    tmp_path: Path, home: Path, no_hosts: Path
) -> None:
    hosts = tmp_path / "hosts.ini"
    hosts.write_text("lab1\n")
    hosts.chmod(0o666)
    with pytest.raises(InventoryUnreadable, match="writable by other users"):
        load_inventory(no_hosts, use_ssh_config=False, ansible=hosts)
    included = home / ".ssh" / "extra.conf"
    included.write_text("Host lab2\n")
    (home / ".ssh" / "config").write_text("Include extra.conf\n")
    assert [h.name for h in load_inventory(no_hosts, home=home).hosts] == ["lab2"]
    included.chmod(0o620)
    with pytest.raises(InventoryUnreadable, match=rf"{included}: refused, as ssh refuses such a config"):
        load_inventory(no_hosts, home=home)


# -- writing our file ---------------------------------------------------------------------------


def test_writing_our_file_follows_no_link_laid_where_its_temporary_file_was(tmp_path: Path) -> None:
    target = tmp_path / "inventory.yaml"
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    # The name the temporary file used to have: predictable, and followed when a link stood there.
    (tmp_path / f".{target.name}.{os.getpid()}.tmp").symlink_to(victim)
    write_text(target, "hosts:\n  a:\n")
    assert victim.read_text() == "precious\n"
    assert target.read_text() == "hosts:\n  a:\n"
    assert not target.is_symlink()
    assert target.stat().st_mode & 0o077 == 0
