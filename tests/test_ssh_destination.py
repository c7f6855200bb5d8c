"""Destinations as ssh is given them: aliases, users, ports, IPv6, and what is refused."""

from __future__ import annotations

import pytest

from remote_acp.errors import ErrorKind
from remote_acp.targets.ssh.destination import Destination, parse_destination
from remote_acp.targets.ssh.target import SshTarget
from tests.support.ssh_build import (
    raises_kind,
)

# -- parse_destination --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "host", "port", "label"),
    [
        ("build", "build", None, "build"),
        ("build-host.example.com", "build-host.example.com", None, "build-host.example.com"),
        ("  build  ", "build", None, "build"),
        ("build\n", "build", None, "build"),
        ("user@build", "user@build", None, "user@build"),
        ("build:2222", "build", 2222, "build:2222"),
        ("user@build:22", "user@build", 22, "user@build:22"),
        ("10.0.0.5:1", "10.0.0.5", 1, "10.0.0.5:1"),
        ("host:65535", "host", 65535, "host:65535"),
        ("[::1]:2222", "::1", 2222, "[::1]:2222"),
        ("[fe80::1]", "fe80::1", None, "fe80::1"),
        ("[build]:22", "build", 22, "build:22"),
        ("::1", "::1", None, "::1"),
        ("fe80::1:2", "fe80::1:2", None, "fe80::1:2"),
        ("2001:db8::42", "2001:db8::42", None, "2001:db8::42"),
        ("a@b@build", "a@b@build", None, "a@b@build"),
        ("user.name@127.0.0.2:2201", "user.name@127.0.0.2", 2201, "user.name@127.0.0.2:2201"),
    ],
)
def test_parse_destination_accepts(text: str, host: str, port: int | None, label: str) -> None:
    destination = parse_destination(text)
    assert destination == Destination(host, port)
    assert destination.label == label


def test_destination_label_brackets_an_ipv6_host_with_a_port() -> None:
    assert Destination("::1", 22).label == "[::1]:22"
    assert Destination("::1").label == "::1"
    assert Destination("build", 2222).label == "build:2222"
    assert Destination("build").label == "build"


def test_destination_label_of_user_at_ipv6_with_port() -> None:
    destination = parse_destination("user@[::1]:22")
    assert destination == Destination("user@::1", 22)
    assert destination.label == "user@[::1]:22"


@pytest.mark.parametrize(
    "text",
    ["host:0", "host:65536", "host:99999", "host:abc", "host:", "host:-1", "host:+22", "host:2.2"]
    + ["[::1]:0", "[::1]:65536", "[::1]:x", "[::1]:", "user@host:ssh", "host:0x16"],
)
def test_parse_destination_refuses_a_bad_port(text: str) -> None:
    with raises_kind(ErrorKind.AGENT_NOT_FOUND) as info:
        parse_destination(text)
    assert info.value.message == f"the ssh destination {text!r} has an invalid port"


@pytest.mark.parametrize("text", ["host:\u00b2", "host:\u0662\u0662", "[::1]:\u00b9"])
def test_parse_destination_refuses_non_ascii_digits_in_the_port(text: str) -> None:
    with raises_kind(ErrorKind.AGENT_NOT_FOUND) as info:
        parse_destination(text)
    assert info.value.message == f"the ssh destination {text!r} has an invalid port"


@pytest.mark.parametrize(
    "text",
    ["", " ", "   ", "\t", "\n", "bu ild", "user@bu ild", "a\tb", "host\x00", "ho\x1bst", "h\x01", "\u00a0"]
    + ["bu\x85ild", "user @build", "a\nb"],
)
def test_parse_destination_refuses_empty_blanks_and_control_characters(text: str) -> None:
    with raises_kind(ErrorKind.AGENT_NOT_FOUND) as info:
        parse_destination(text)
    assert info.value.message == f"the ssh destination {text!r} is empty or contains blanks"


@pytest.mark.parametrize("text", ["ho\x7fst", "ho\x9b31mst"])
def test_parse_destination_refuses_del_and_c1_controls(text: str) -> None:
    with raises_kind(ErrorKind.AGENT_NOT_FOUND):
        parse_destination(text)


@pytest.mark.parametrize(
    "text",
    ["-oProxyCommand=touch pwned", "-host", "-F/tmp/x", "--", "-", "-user@host", "user@-host", "-u@-h"]
    + ["[-oProxyCommand=x]:22", "[-x]", "-host:22", "  -host", "user@", "@", ":22", "[]:22", "[]", "user@:22"],
)
def test_parse_destination_refuses_what_could_read_as_an_option(text: str) -> None:
    with raises_kind(ErrorKind.AGENT_NOT_FOUND) as info:
        parse_destination(text)
    if " " in text.strip():  # blanks are refused first
        assert "is empty or contains blanks" in info.value.message
    else:
        assert info.value.message == f"the ssh destination {text!r} is refused: it would read as an option"


@pytest.mark.parametrize("text", ["[::1", "[::1]x", "[::1]2222", "user@[::1", "[::1]]:22"])
def test_parse_destination_refuses_malformed_brackets(text: str) -> None:
    with raises_kind(ErrorKind.AGENT_NOT_FOUND) as info:
        parse_destination(text)
    assert info.value.message == f"the ssh destination {text!r} is not well formed"


def test_ssh_target_label_comes_from_the_destination() -> None:
    assert SshTarget("user@build:2222").label == "user@build:2222"
    assert SshTarget("[::1]:2201").label == "[::1]:2201"
    assert SshTarget("build").remote is True
    with raises_kind(ErrorKind.AGENT_NOT_FOUND):
        _ = SshTarget("-oProxyCommand=x").label
