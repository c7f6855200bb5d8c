"""The generated ssh_config of an inventory host, read back by the real ``ssh -G``: every option
shape the inventory may carry means to ssh what it means in the operator's own ssh_config."""

from __future__ import annotations

import shutil
import subprocess
from typing import TYPE_CHECKING

import pytest

from hostinv import Host
from remote_acp.fleet import host_config_text

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.skipif(shutil.which("ssh") is None, reason="needs the OpenSSH client")


def ssh_g(host: Host, tmp_path: Path) -> dict[str, str]:
    text = host_config_text(host, "none", home=str(tmp_path))
    assert text is not None
    config = tmp_path / "config"
    config.write_text(text)
    done = subprocess.run(
        ["ssh", "-G", "-F", str(config), host.address or host.name],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answers: dict[str, str] = {}
    for line in done.stdout.splitlines():
        key, _, value = line.partition(" ")
        answers.setdefault(key, value)  # the first IdentityFile is ours
    return answers


@pytest.mark.parametrize(
    ("options", "key", "expected"),
    [
        ({"ProxyJump": "jump@10.0.0.9:2222"}, "proxyjump", "jump@[10.0.0.9]:2222"),  # ssh -G's own spelling
        ({"ProxyJump": "a@h1:22,b@h2"}, "proxyjump", "a@h1:22,b@h2"),
        ({"ProxyCommand": "nc -X connect %h %p"}, "proxycommand", "nc -X connect %h %p"),
        ({"SendEnv": "LC_*"}, "sendenv", "LC_*"),
        ({"UserKnownHostsFile": "/k/one /k/two"}, "userknownhostsfile", "/k/one /k/two"),
        ({"HostKeyAlias": "build-7"}, "hostkeyalias", "build-7"),
        ({"ServerAliveInterval": "7"}, "serveraliveinterval", "7"),
    ],
)
def test_each_option_means_to_ssh_what_the_inventory_says(
    options: dict[str, str], key: str, expected: str, tmp_path: Path
) -> None:
    answers = ssh_g(Host(name="b", address="10.0.0.5", ssh_options=options), tmp_path)
    assert answers[key] == expected


def test_an_identity_file_with_blanks_quotes_and_percent_is_one_literal_path(tmp_path: Path) -> None:
    odd = "/keys/my key's 100%"
    answers = ssh_g(Host(name="b", address="10.0.0.5", identity_file=odd), tmp_path)
    # ssh -G shows the value before its % tokens are expanded: %% is the one literal %.
    assert answers["identityfile"] == odd.replace("%", "%%")
