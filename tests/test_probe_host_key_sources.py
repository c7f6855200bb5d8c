"""Host keys from beyond the known_hosts files, as data: ``ssh -G``'s KnownHostsCommand,
RevokedHostKeys and VerifyHostKeyDNS read, the revoked-keys file parsed as ssh reads it, and the
decision failing closed (nothing trusted the probe cannot check, nothing written)."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

import asyncssh
import pytest

from hostinv.causes import Cause
from hostinv.probes.connect import _known_hosts, _plain_blob, judge_connect_error, key_check
from hostinv.probes.host_keys import KRL_MAGIC, HostKeyCheck, RevokedKeys, merge_revoked, read_revoked_keys
from hostinv.probes.verdicts import Verdict
from hostinv.sshopts import ResolvedSsh, expand_revoked_path, parse_ssh_g

if TYPE_CHECKING:
    from pathlib import Path

G_OUTPUT = "host lab1\nhostname 10.0.0.5\nport 2222\nuser deploy\n"


def key() -> Any:
    return asyncssh.generate_private_key("ssh-ed25519").convert_to_public()


def line(k: Any) -> str:
    return bytes(k.export_public_key()).decode().strip()


def b64(k: Any) -> str:
    return base64.b64encode(bytes(k.public_data)).decode()


def refused_exc() -> Exception:
    return asyncssh.HostKeyNotVerifiable("Host key is not trusted for host 10.0.0.5")


# -- ssh -G ------------------------------------------------------------------------------------------


def test_ssh_g_options_beyond_known_hosts_are_read() -> None:
    resolved = parse_ssh_g(
        G_OUTPUT + "knownhostscommand /bin/cat %h kh\nrevokedhostkeys ~/rev_%h.pub\nverifyhostkeydns ask\n",
        home="/home/u",
    )
    assert resolved.known_hosts_command == "/bin/cat %h kh"
    assert resolved.revoked_host_keys == "~/rev_%h.pub"  # as ssh -G prints it: expanded when opened
    assert resolved.verify_host_key_dns == "ask"
    assert resolved.original == "lab1"
    assert resolved.unchecked_key_sources == ("KnownHostsCommand", "DNS (VerifyHostKeyDNS)")


@pytest.mark.parametrize(("printed", "read"), [("false", "no"), ("true", "yes"), ("ask", "ask"), ("maybe", "yes")])
def test_verify_host_key_dns_reads_as_ssh_applies_it(printed: str, read: str) -> None:
    assert parse_ssh_g(G_OUTPUT + f"verifyhostkeydns {printed}\n").verify_host_key_dns == read


def test_nothing_set_leaves_the_known_hosts_files_alone() -> None:
    resolved = parse_ssh_g(G_OUTPUT + "knownhostscommand none\nverifyhostkeydns false\n")
    assert resolved.known_hosts_command is None and resolved.revoked_host_keys is None
    assert resolved.unchecked_key_sources == ()


def test_a_revoked_path_expands_as_later_ssh_expands_it() -> None:
    resolved = parse_ssh_g(G_OUTPUT)
    path = expand_revoked_path(
        "~/r/%h-%p-%r-%n-%u-%i-%L-%%-${ZONE}",
        resolved,
        home="/home/u",
        local_user="me",
        uid=1000,
        local_host="box.example",
        environ={"ZONE": "z"},
    )
    assert path == "/home/u/r/10.0.0.5-2222-deploy-lab1-me-1000-box-%-z"


@pytest.mark.parametrize("value", ["%X", "${UNSET}", "${open", "~other/x", "trailing%"])
def test_a_revoked_path_the_probe_cannot_expand_is_refused(value: str) -> None:
    with pytest.raises(ValueError):
        expand_revoked_path(value, parse_ssh_g(G_OUTPUT), home="/h", local_user="u", uid=0, local_host="h", environ={})


# -- the revoked-keys file ----------------------------------------------------------------------


def test_the_revoked_file_is_read_as_ssh_reads_it(tmp_path: Path) -> None:
    listed, certified = key(), key()
    ca = asyncssh.generate_private_key("ssh-ed25519")
    cert = ca.generate_host_certificate(certified, "h", principals=["h"])
    path = tmp_path / "revoked"
    path.write_text(f"# comment\n\n   {line(listed)}\n\t{bytes(cert.export_certificate()).decode()}")
    revoked = read_revoked_keys(str(path), _plain_blob)
    assert not revoked.problem
    assert revoked.lists(b64(listed)) and revoked.lists(b64(certified))  # a certificate lists its key
    assert not revoked.lists(b64(key()))


@pytest.mark.parametrize(
    ("content", "words", "cause"),
    [
        (None, "cannot be read", Cause.SSH_CONFIG_INVALID),
        (b"cert-authority ssh-ed25519 AAAA\n", "line 1", Cause.SSH_CONFIG_INVALID),
        (KRL_MAGIC + b"\x00\x00\x00\x01", "KRL", Cause.HOST_KEY_UNKNOWN),
    ],
    ids=["missing", "not-a-key", "krl"],
)
def test_a_revoked_file_no_key_can_be_checked_against_refuses_every_key(
    tmp_path: Path, content: bytes | None, words: str, cause: Cause
) -> None:
    path = tmp_path / "revoked"
    if content is not None:
        path.write_bytes(content)
    revoked = read_revoked_keys(str(path), _plain_blob)
    assert words in revoked.problem and revoked.cause is cause
    check = HostKeyCheck(ResolvedSsh("10.0.0.5", 22, "u"), "accept-new", (), str(tmp_path / "kh"), revoked=revoked)
    assert not check.decide("10.0.0.5", "ssh-ed25519", b64(key()), lambda _path: False)
    assert check.outcome == "unverifiable"
    assert not (tmp_path / "kh").exists()
    judged = judge_connect_error(
        refused_exc(), destination="lab1", address="10.0.0.5", port=22, connect_timeout_s=5, key_check=check
    )
    assert judged.cause is cause and judged.verdict is not Verdict.READY
    assert "RevokedHostKeys" in judged.message and "nothing written" in judged.message


def test_readings_of_both_spellings_merge_failing_closed(tmp_path: Path) -> None:
    one, two = key(), key()
    a = RevokedKeys("a", frozenset({bytes(one.public_data)}))
    b = RevokedKeys("b", frozenset({bytes(two.public_data)}))
    gone = RevokedKeys("c", problem="cannot be read", opened=False)
    assert merge_revoked([a, b]).lists(b64(one)) and merge_revoked([a, b]).lists(b64(two))
    assert merge_revoked([gone, a]).blobs == a.blobs  # the one ssh version would open
    assert merge_revoked([gone, gone]).problem
    assert merge_revoked([a, RevokedKeys("k", problem="a KRL")]).problem  # one that cannot be checked


# -- the decision --------------------------------------------------------------------------------


def test_a_listed_key_is_refused_as_revoked(tmp_path: Path) -> None:
    presented = key()
    revoked = RevokedKeys(str(tmp_path / "revoked"), frozenset({bytes(presented.public_data)}))
    check = HostKeyCheck(ResolvedSsh("10.0.0.5", 22, "u"), "accept-new", (), str(tmp_path / "kh"), revoked=revoked)
    assert not check.decide("10.0.0.5", "ssh-ed25519", b64(presented), lambda _path: False)
    assert check.outcome == "revoked" and check.found_in == revoked.path
    assert not (tmp_path / "kh").exists()
    judged = judge_connect_error(
        refused_exc(), destination="lab1", address="10.0.0.5", port=22, connect_timeout_s=5, key_check=check
    )
    assert judged.verdict is Verdict.HOST_KEY_CHANGED and judged.cause is Cause.HOST_KEY_CHANGED
    assert "revoked" in judged.message and revoked.path in judged.message


def test_an_unlisted_key_is_added_under_accept_new(tmp_path: Path) -> None:
    revoked = RevokedKeys("r", frozenset({bytes(key().public_data)}))
    check = HostKeyCheck(ResolvedSsh("10.0.0.5", 22, "u"), "accept-new", (), str(tmp_path / "kh"), revoked=revoked)
    assert check.decide("10.0.0.5", "ssh-ed25519", b64(key()), lambda _path: False)
    assert check.outcome == "added"


@pytest.mark.parametrize(
    ("fields", "source"),
    [({"known_hosts_command": "/bin/cat kh"}, "KnownHostsCommand"), ({"verify_host_key_dns": "yes"}, "DNS")],
)
def test_a_key_ssh_verifies_elsewhere_is_neither_trusted_nor_written(
    tmp_path: Path, fields: dict[str, str], source: str
) -> None:
    resolved = ResolvedSsh("10.0.0.5", 2222, "u", **fields)  # type: ignore[arg-type]
    check = HostKeyCheck(resolved, "accept-new", (), str(tmp_path / "kh"))
    assert not check.decide("10.0.0.5", "ssh-ed25519", b64(key()), lambda _path: False)
    assert check.outcome == "unknown" and not (tmp_path / "kh").exists()
    judged = judge_connect_error(
        refused_exc(), destination="lab1", address="10.0.0.5", port=2222, connect_timeout_s=5, key_check=check
    )
    assert judged.verdict is Verdict.HOST_KEY_UNKNOWN and judged.cause is Cause.HOST_KEY_UNKNOWN
    assert source in judged.message and "check host" in judged.message and "nothing written" in judged.message


def test_a_changed_key_stays_changed_whatever_else_is_set(tmp_path: Path) -> None:
    resolved = ResolvedSsh("10.0.0.5", 22, "u", known_hosts_command="/bin/true")
    check = HostKeyCheck(resolved, "accept-new", ("kh",), "kh")
    assert not check.decide("10.0.0.5", "ssh-ed25519", b64(key()), lambda path: path == "kh")
    assert check.outcome == "changed"


# -- what asyncssh is given --------------------------------------------------------------------


def test_a_revoked_key_the_files_hold_is_not_trusted_by_the_connection(tmp_path: Path) -> None:
    revoked_key, kept_key = key(), key()
    known = tmp_path / "known_hosts"
    known.write_text(f"[10.0.0.5]:2222 {line(revoked_key)}\n[10.0.0.5]:2222 {line(kept_key)}\n")
    listed = tmp_path / "revoked"
    listed.write_text(line(revoked_key) + "\n")
    resolved = ResolvedSsh("10.0.0.5", 2222, "u", user_known_hosts=(str(known),), revoked_host_keys=str(listed))
    check = key_check(resolved, requested="accept-new", known_hosts=None)
    trusted = asyncssh.match_known_hosts(_known_hosts(check), "10.0.0.5", "10.0.0.5", 2222)[0]
    assert {bytes(k.public_data) for k in trusted} == {bytes(kept_key.public_data)}  # a set, as asyncssh keeps it
    listed.write_text("garbage\n")  # a file that cannot be checked: no key trusted at all
    check = key_check(resolved, requested="accept-new", known_hosts=None)
    assert asyncssh.match_known_hosts(_known_hosts(check), "10.0.0.5", "10.0.0.5", 2222)[0] == []


def test_without_revoked_keys_the_files_are_given_as_they_are(tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text(f"10.0.0.5 {line(key())}\n")
    check = key_check(
        ResolvedSsh("10.0.0.5", 22, "u", user_known_hosts=(str(known),)), requested="accept-new", known_hosts=None
    )
    assert isinstance(_known_hosts(check), asyncssh.SSHKnownHosts)
