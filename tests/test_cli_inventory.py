"""``remote-acp inventory``, run as a real process with a home and config directory of its own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures" / "inventory"
CLI = [sys.executable, "-m", "remote_acp.cli.main"]
JSON_KEYS = [
    "name", "address", "port", "user", "identity_file", "groups", "labels", "capacity", "ssh_options",
    "from_ssh_config", "destination", "sources",
]  # fmt: skip


class Home:
    """A user of our own: HOME (with ~/.ssh) and XDG_CONFIG_HOME under a temporary directory."""

    def __init__(self, root: Path) -> None:
        self.home = root / "home"
        self.config = root / "xdg"
        (self.home / ".ssh").mkdir(parents=True)
        self.env = {k: v for k, v in os.environ.items() if k != "REMOTE_ACP_INVENTORY"}
        self.env |= {"HOME": str(self.home), "XDG_CONFIG_HOME": str(self.config), "COLUMNS": "200"}

    @property
    def inventory(self) -> Path:
        return self.config / "remote-acp" / "inventory.yaml"

    def install_ssh_config(self) -> None:
        shutil.copytree(FIXTURES / "ssh", self.home / ".ssh", dirs_exist_ok=True)

    def run(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*CLI, "inventory", *args], capture_output=True, text=True, env=env or self.env, timeout=60, check=False
        )


@pytest.fixture
def user(tmp_path: Path) -> Home:
    return Home(tmp_path)


def lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def test_empty_inventory_lists_nothing_and_says_so(user: Home) -> None:
    done = user.run("list")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "no hosts in the inventory yet (see `remote-acp inventory import`)\n"
    done = user.run("list", "--json")
    assert (done.returncode, done.stdout) == (0, "")


def test_list_json_merges_our_file_ansible_and_the_ssh_config(user: Home) -> None:
    user.install_ssh_config()
    done = user.run("list", "--json", "--inventory", str(FIXTURES / "inventory.yaml"))
    assert done.returncode == 0, done.stderr
    hosts = lines(done.stdout)
    assert all(list(h) == JSON_KEYS for h in hosts)
    names = [h["name"] for h in hosts]
    assert names[:5] == ["build-01", "build-arm1", "legacy-box", "sandbox", "bastion.example.net"]
    assert names[-3:] == ["mac-mini-7", "bastion", "build-02"]
    build = hosts[0]
    assert build["capacity"] == 4
    assert build["destination"] == "ci@10.1.0.5:22"
    assert build["groups"] == ["build", "fast", "linux", "build_x86"]
    # what the ssh_config says is shown apart, never an override: ssh reads it itself
    assert build["ssh_options"] == {}
    assert build["from_ssh_config"] == {"address": "build-01.farm.internal", "user": "builder", "port": "2201"}
    bastion = next(h for h in hosts if h["name"] == "bastion")
    assert (bastion["destination"], bastion["address"], bastion["ssh_options"]) == ("bastion", None, {})
    assert "note: " in done.stderr and "Match block not shown" in done.stderr


def test_list_selectors_in_inventory_order(user: Home) -> None:
    args = ["--no-ssh-config", "--ansible", str(FIXTURES / "ansible" / "hosts.ini"), "--json"]
    done = user.run("list", *args, "web0[2-3]*", "@build", "ops@10.9.9.9:2200")
    assert done.returncode == 0, done.stderr
    assert [h["name"] for h in lines(done.stdout)] == [
        "web02.example.com", "web03.example.com", "build-01", "build-03", "build-arm1", "ops@10.9.9.9:2200",
    ]  # fmt: skip


def test_list_table_for_people(user: Home) -> None:
    done = user.run("list", "--no-ssh-config", "--inventory", str(FIXTURES / "inventory.yaml"), "build-arm1", "sandbox")
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()]
    assert rows[0] == ["host", "destination", "groups", "capacity", "labels", "from"]
    assert rows[1][:4] == ["build-arm1", "arm-ci@10.2.0.7:2201", "build,linux,build_arm", "2"]
    assert "arch=aarch64" in rows[1]
    assert rows[2] == ["sandbox", "ci@sandbox", "1", "site=fra1", "inventory.yaml"]


@pytest.mark.parametrize(
    ("selector", "message"), [("@nope", "no host is in the group 'nope'"), ("-x", "would read as an option")]
)
def test_a_selector_that_matches_nothing_is_a_usage_error(user: Home, selector: str, message: str) -> None:
    done = user.run("list", "--no-ssh-config", "--inventory", str(FIXTURES / "inventory.yaml"), "--", selector)
    assert done.returncode == 2
    assert message in done.stderr
    assert done.stdout == ""


def test_an_invalid_inventory_exits_10_naming_file_line_and_key(user: Home, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("hosts:\n  build-1:\n    port: 70000\n")
    done = user.run("list", "--inventory", str(bad))
    assert done.returncode == 10
    assert (
        f"{bad}:3: invalid inventory at hosts.build-1.port: Input should be less than or equal to 65535" in done.stderr
    )


def test_the_environment_names_our_file_and_it_must_exist(user: Home, tmp_path: Path) -> None:
    env = user.env | {"REMOTE_ACP_INVENTORY": str(tmp_path / "missing.yaml")}
    done = user.run("list", env=env)
    assert done.returncode == 10
    assert f"{tmp_path / 'missing.yaml'}: cannot read" in done.stderr
    (tmp_path / "missing.yaml").write_text("hosts:\n  from-env:\n")
    done = user.run("list", "--json", env=env)
    assert [h["name"] for h in lines(done.stdout)] == ["from-env"]


def test_import_ansible_writes_our_file_then_refuses_to_replace_it(user: Home) -> None:
    source = FIXTURES / "ansible" / "hosts.yml"
    done = user.run("import", "ansible", str(source))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"wrote 6 hosts to {user.inventory}\n"
    text = user.inventory.read_text()
    assert text.startswith(f"# remote-acp inventory, imported from {source}")
    listed = lines(user.run("list", "--json").stdout)
    assert [(h["name"], h["destination"], h["capacity"]) for h in listed][:2] == [
        ("bastion.example.net", "ops@bastion.example.net", 1), ("build-01", "ci@10.1.0.5", 2),
    ]  # fmt: skip
    assert all(h["sources"] == [str(user.inventory)] for h in listed)

    again = user.run("import", "ansible", str(FIXTURES / "ansible" / "hosts.ini"))
    assert again.returncode == 10
    assert f"{user.inventory} exists; pass --force to replace it" in again.stderr
    assert user.inventory.read_text() == text
    forced = user.run("import", "ansible", "--force", str(FIXTURES / "ansible" / "hosts.ini"))
    assert forced.returncode == 0, forced.stderr
    assert "note: " in forced.stderr and "ansible_connection=local" in forced.stderr
    assert "web-canary.example.com" in user.inventory.read_text()


def test_import_ssh_config_reads_the_users_config_by_default(user: Home) -> None:
    user.install_ssh_config()
    target = user.home / "elsewhere" / "inv.yaml"
    done = user.run("import", "ssh-config", "--inventory", str(target))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"wrote 7 hosts to {target}\n"
    # the names only: each is reached by its alias, so ssh goes on applying the ssh_config
    listed = lines(user.run("list", "--json", "--no-ssh-config", "--inventory", str(target)).stdout)
    build = next(h for h in listed if h["name"] == "build-01")
    assert (build["destination"], build["ssh_options"], build["from_ssh_config"]) == ("build-01", {}, {})
    assert "bastion:" in target.read_text() and "farm.internal" not in target.read_text()


def test_import_of_an_unreadable_source_exits_10(user: Home, tmp_path: Path) -> None:
    done = user.run("import", "ssh-config", str(tmp_path / "no-such-config"))
    assert done.returncode == 10
    assert "no-such-config: cannot read" in done.stderr
    assert not user.inventory.exists()


def test_version_does_not_load_the_inventory_machinery() -> None:
    code = (
        "import sys, runpy\nsys.argv = ['remote-acp', '--version']\n"
        "try:\n    runpy.run_module('remote_acp.cli.main', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        # hostinv's cause table is every error's vocabulary: that and nothing else of hostinv.
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'hostinv', 'yaml', 'pydantic', 'rich'}"
        " and m not in {'hostinv', 'hostinv.lazy', 'hostinv.causes'}"
        " or m == 'remote_acp.cli.inventory'), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.stdout.startswith("remote-acp, version")
    assert done.stderr.strip() == "[]"


def test_an_inventory_error_quoting_the_file_reaches_the_terminal_escaped(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.ini"
    hosts.write_text('[web]\nlab1 x="\x1b]0;PWNED\x07\n')
    done = subprocess.run(
        [sys.executable, "-m", "remote_acp.cli.main", "inventory", "list", "--ansible", str(hosts)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 10, done.stderr
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr
    assert "\\x1b]0;PWNED" in done.stderr


def test_list_takes_ssh_config_none_as_check_host_does(user: Home) -> None:
    user.install_ssh_config()
    for none in ("none", "NONE"):
        done = user.run("list", "--json", "--ssh-config", none, "--inventory", str(FIXTURES / "inventory.yaml"))
        assert done.returncode == 0, done.stderr
        names = [h["name"] for h in lines(done.stdout)]
        assert "build-01" in names and "gpu-a100-1" not in names  # ours and Ansible's, no ssh_config
        assert all(str(user.home / ".ssh") not in s for h in lines(done.stdout) for s in h["sources"])


def test_every_cell_of_the_table_reaches_the_terminal_escaped(user: Home, tmp_path: Path) -> None:
    own = tmp_path / "inv\x1b]0;FROM\x07.yaml"
    own.write_text('hosts:\n  lab1:\n    labels: {"k\\e[2J": "\\e]0;LABEL\\a"}\n')
    done = user.run("list", "--no-ssh-config", "--inventory", str(own))
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert "k\\x1b[2J=\\x1b]0;LABEL\\x07" in done.stdout
    assert "inv\\x1b]0;FROM\\x07.yaml" in done.stdout


def test_a_host_of_the_ssh_config_is_listed_by_its_alias_with_what_its_blocks_say(user: Home) -> None:
    user.install_ssh_config()
    done = user.run("list", "bastion", "legacy-box")
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()]
    assert rows[1][:3] == ["bastion", "bastion", "(ops@bastion.example.net)"]
    assert rows[2][:3] == ["legacy-box", "legacy-box", "(root@192.0.2.44:2222)"]
