"""SshSettings: what is refused, by position where the text could be a secret."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from remote_acp.targets.ssh.script import remote_script
from remote_acp.targets.ssh.settings import MAX_REATTACH_WINDOW_S, SshSettings
from tests.support.ssh_build import (
    RUN_TIMEOUT_S,
)

# -- SshSettings --------------------------------------------------------------------------------


def test_settings_defaults() -> None:
    settings = SshSettings()
    assert settings.host_key_policy is None
    assert settings.force_insecure_host_keys is False
    assert settings.config_file is None
    assert settings.connect_timeout_s == 10
    assert (settings.server_alive_interval_s, settings.server_alive_count_max) == (15, 3)
    assert settings.pass_env == ()
    assert settings.kill_grace_s == 3
    assert settings.max_concurrent_starts == 8  # below sshd's default MaxStartups (10)
    assert settings.reattach_window_s is None  # no window: the agent ends with its link


def test_settings_refuse_policy_no_unless_forced() -> None:
    with pytest.raises(ValueError) as info:
        SshSettings(host_key_policy="no")
    assert str(info.value) == (
        "host key policy 'no' connects even to a host whose key changed; set force_insecure_host_keys to use it anyway"
    )
    assert SshSettings(host_key_policy="no", force_insecure_host_keys=True).host_key_policy == "no"
    assert SshSettings(host_key_policy="yes").host_key_policy == "yes"
    assert SshSettings(host_key_policy="accept-new").host_key_policy == "accept-new"


@pytest.mark.parametrize("policy", ["ask", "off", "false", "", "YES", "accept_new"])
def test_settings_refuse_an_unknown_policy(policy: str) -> None:
    with pytest.raises(ValueError) as info:
        SshSettings(host_key_policy=policy)  # type: ignore[arg-type]
    assert str(info.value) == "host_key_policy must be one of accept-new, yes, no"


@pytest.mark.parametrize("path", ["", "/etc/a\nHost *", "/etc/a\r", "/etc/\0a"])
def test_settings_refuse_a_config_file_that_cannot_be_one_ssh_config_word(path: str) -> None:
    with pytest.raises(ValueError) as info:
        SshSettings(config_file=path)
    assert str(info.value) == "config_file must be a non-empty path without line breaks"


BOUNDED_FIELDS = [
    "connect_timeout_s",
    "server_alive_interval_s",
    "server_alive_count_max",
    "kill_grace_s",
    "max_concurrent_starts",
]


@pytest.mark.parametrize("field", BOUNDED_FIELDS)
@pytest.mark.parametrize("value", [0, -1, -3600])
def test_settings_refuse_bounds_below_one(field: str, value: int) -> None:
    with pytest.raises(ValueError) as info:
        SshSettings(**{field: value})  # type: ignore[arg-type]
    assert str(info.value) == f"{field} must be at least 1"
    assert getattr(SshSettings(**{field: 1}), field) == 1  # type: ignore[arg-type]


@pytest.mark.parametrize("field", BOUNDED_FIELDS)
@pytest.mark.parametrize(
    ("value", "kind"),
    [(2.5, "float"), (3.0, "float"), (True, "bool"), (False, "bool"), ("3", "str"), (None, "NoneType")],
)
def test_settings_refuse_numbers_that_are_not_ints(field: str, value: object, kind: str) -> None:
    # 2.5 would reach the remote shell as `[ "$_ra_n" -lt 2.5 ]`; True would read as 1.
    with pytest.raises(ValueError) as info:
        SshSettings(**{field: value})  # type: ignore[arg-type]
    assert str(info.value) == f"{field} must be an integer, not {kind}"


@pytest.mark.parametrize("seconds", [1, 90, 3600, MAX_REATTACH_WINDOW_S])
def test_settings_take_a_reattach_window_from_a_second_to_a_week(seconds: int) -> None:
    assert MAX_REATTACH_WINDOW_S == 7 * 24 * 3600
    assert SshSettings(reattach_window_s=seconds).reattach_window_s == seconds


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "reattach_window_s must be at least 1"),
        (-5, "reattach_window_s must be at least 1"),
        (MAX_REATTACH_WINDOW_S + 1, "reattach_window_s must be at most 604800 (7 days), not 604801"),
        (10**12, "reattach_window_s must be at most 604800 (7 days), not 1000000000000"),
        (1.5, "reattach_window_s must be an integer, not float"),
        (60.0, "reattach_window_s must be an integer, not float"),
        (True, "reattach_window_s must be an integer, not bool"),
        ("60", "reattach_window_s must be an integer, not str"),
    ],
)
def test_settings_refuse_a_reattach_window_that_is_no_whole_count_of_seconds_up_to_a_week(
    value: object, message: str
) -> None:
    with pytest.raises(ValueError) as info:
        SshSettings(reattach_window_s=value)  # type: ignore[arg-type]
    assert str(info.value) == message


def test_remote_script_refuses_a_grace_that_is_not_a_whole_count_and_an_odd_token() -> None:
    for grace, message in [
        (2.5, "kill_grace_s must be an integer, not float"),
        (True, "kill_grace_s must be an integer, not bool"),
        (0, "kill_grace_s must be at least 1"),
    ]:
        with pytest.raises(ValueError) as info:
            remote_script("/w", ["agent"], kill_grace_s=grace)  # type: ignore[arg-type]
        assert str(info.value) == message
    for token in ["", "a.b", "a b", "x'y", "ünï", "a\\."]:
        with pytest.raises(ValueError, match="the session token must be ASCII letters and digits"):
            remote_script("/w", ["agent"], token=token)


@pytest.mark.parametrize(
    ("names", "index"),
    [
        (("1BAD",), 0),
        (("GOOD", "A-B"), 1),
        (("GOOD", "OTHER", ""), 2),
        (("A B",), 0),
        (("X\n",), 0),
        (("_RA_SESSION",), 0),
        (("OK", "_RA_COMPLETE"), 1),
        (("sk-live-0123456789abcdef",), 0),
        (("API_KEY=sk-live-0123456789abcdef",), 0),
        (("ÜBER",), 0),
        (("$HOME",), 0),
        (("_ra_agent",), 0),  # the supervisor's own variables, in any case
        (("OK", "_Ra_X"), 1),
    ],
)
def test_settings_refuse_invalid_pass_env_names_by_position(names: tuple[str, ...], index: int) -> None:
    with pytest.raises(ValueError) as info:
        SshSettings(pass_env=names)
    message = str(info.value)
    assert message == f"ssh_pass_env entry {index} is not a valid environment variable name"
    bad = names[index]
    assert not bad or bad.strip() not in message  # the text could be a secret: never echoed


RESERVED_NAMES = ["IFS", "PPID", "UID", "EUID", "SHELLOPTS", "BASHOPTS", "BASH_VERSINFO", "FUNCNEST", "GLOBIGNORE"]


@pytest.mark.parametrize("name", [*RESERVED_NAMES, "EXECIGNORE"])
def test_settings_refuse_names_the_remote_shell_needs_by_position(name: str) -> None:
    with pytest.raises(ValueError) as info:
        SshSettings(pass_env=("API_KEY", "PATH", name))
    assert str(info.value) == "ssh_pass_env entry 2 names a variable the remote shell needs for itself"


def test_settings_accept_valid_pass_env_names() -> None:
    names = ("API_KEY", "_", "a1", "_private", "RA_OK", "_RA", "lower_case", "PATH", "HOME", "ifs", "LANG")
    assert SshSettings(pass_env=names).pass_env == names


def test_ifs_or_ppid_from_the_environment_would_break_the_supervisor() -> None:
    # Why IFS and PPID are reserved: imported ahead of the supervisor, they change how it splits
    # words and whom it takes for the connection. (Shown with dash, which lets PPID be assigned.)
    probe = 'set -- $(echo "1 2 3"); echo "$# $PPID"'
    plain = subprocess.run(["sh", "-c", probe], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    assert plain.stdout.split()[0] == "3"
    preamble = "export IFS=, PPID=1; "  # what carrying them would do ahead of the supervisor
    spoiled = subprocess.run(
        ["dash" if shutil.which("dash") else "sh", "-c", f"{preamble}{probe}"],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert spoiled.stdout.split()[0] == "1"  # the words no longer split
