"""The probe's own bounds and readings, without a host: the report scanner fed every way a stream
can be cut, the ProxyCommand as ssh expands it, the host-key policy table, the config that tells
ssh's default from ``ask`` (read back by the real ``ssh -G``), and ``ssh -G`` answers that depend
on DNS never kept, however the configuration spells canonicalization.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from typing import TYPE_CHECKING

import pytest

from hostinv.probes import ReportCutShortError, parse_report
from hostinv.probes.channel import REPORT_KEPT, ReportScanner
from hostinv.probes.command import REPORT_END, REPORT_HEADER
from hostinv.probes.host_keys import HostKeyCheck, effective_policy
from hostinv.probes.runner import ProbeSettings, _resolve
from hostinv.sshopts import ResolvedSsh, expand_proxy_command, fallback_config_text, included_files, parse_ssh_g
from tests.support.counted_ssh import counted_ssh, runs

if TYPE_CHECKING:
    from pathlib import Path

SSH = shutil.which("ssh")
OLD = time.time() - 3600
REPORT = f"{REPORT_HEADER}\nos=Linux x86_64\ncores=2\n{REPORT_END}\n".encode()


def scan(pieces: list[bytes]) -> tuple[ReportScanner, int]:
    """Feed ``pieces`` until the scanner says stop; the scanner and the pieces it took."""
    scanner = ReportScanner()
    for taken, piece in enumerate(pieces, 1):
        if scanner.feed(piece):
            return scanner, taken
    return scanner, len(pieces)


@pytest.mark.parametrize(
    "before",
    [
        b"",
        b"motd\n",
        b"noise " * 3000 + b"\n",
        b"#hostinv-probe end\nstray\n",
        b"a login's last words, no newline",  # the header is glued to them
        b"motd #hostinv-probe end\n",
    ],
)
def test_the_report_is_found_and_ended_wherever_the_stream_is_cut(before: bytes) -> None:
    stream = before + REPORT + b"what a lingering process prints after it\n"
    stray = before.find(b"#hostinv-probe ")
    for cut in range(1, len(before) + len(REPORT) + 1, 7 if len(before) > 100 else 1):
        scanner, _ = scan([stream[:cut], stream[cut:]])
        assert scanner.complete, cut
        report = parse_report(scanner.text())
        assert (report.os, report.cores) == ("Linux x86_64", 2)
        assert scanner.before == (stray if stray >= 0 else len(before))


def test_byte_by_byte_the_scanner_stops_at_the_end_line() -> None:
    stream = b"banner\n" + REPORT + b"more\n"
    scanner, taken = scan([bytes([b]) for b in stream])
    assert scanner.complete and taken == len(b"banner\n") + len(REPORT)  # the newline after the end line
    assert parse_report(scanner.text()).cores == 2


def test_an_end_line_that_goes_on_is_not_the_end() -> None:
    scanner, _ = scan([REPORT_HEADER.encode() + b"\nos=x\n" + REPORT_END.encode(), b"ing\ncores=2\n"])
    assert not scanner.complete
    assert scanner.feed(REPORT_END.encode() + b"\r\n")
    assert scanner.complete


def test_noise_before_the_report_keeps_only_a_tail() -> None:
    scanner = ReportScanner()
    for _ in range(2000):
        assert not scanner.feed(b"x" * 65536)
    assert scanner.before == 2000 * 65536
    assert scanner.region is None and len(scanner.text()) <= 4096


def test_a_report_that_never_ends_is_cut_at_its_bound() -> None:
    scanner = ReportScanner()
    assert not scanner.feed(REPORT_HEADER.encode() + b"\n")
    stopped = False
    for _ in range(100):
        if scanner.feed(b"k=" + b"v" * 1000 + b"\n"):
            stopped = True
            break
    assert stopped and scanner.overflow and not scanner.complete
    assert scanner.region is not None and len(scanner.region) == REPORT_KEPT
    with pytest.raises(ReportCutShortError):
        parse_report(scanner.text())


@pytest.mark.parametrize(
    ("command", "argv_tail"),
    [
        ("nc %h %p", "exec nc 10.0.0.5 2222"),
        ("ssh -W %h:%p -l %r jump # %n 100%%", "exec ssh -W 10.0.0.5:2222 -l deploy jump # build-1 100%"),
        ("connect '%h' \"%p\"", "exec connect '10.0.0.5' \"2222\""),  # substituted as they are, as ssh does
    ],
)
def test_a_proxy_command_is_expanded_as_ssh_expands_it(
    command: str, argv_tail: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHELL", "/bin/bash")
    argv = expand_proxy_command(command, hostname="10.0.0.5", port=2222, user="deploy", original="build-1")
    assert argv == ["/bin/bash", "-c", argv_tail]
    monkeypatch.delenv("SHELL")
    assert (
        expand_proxy_command(command, hostname="10.0.0.5", port=2222, user="deploy", original="build-1")[0] == "/bin/sh"
    )


@pytest.mark.parametrize(("command", "says"), [("nc %h %x", "unknown token %x"), ("nc %h %", "lone %")])
def test_a_proxy_command_ssh_would_refuse_is_refused(command: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        expand_proxy_command(command, hostname="h", port=22, user="u", original="h")


@pytest.mark.parametrize(
    ("configured", "requested", "policy"),
    [
        ("yes", "accept-new", "yes"),
        ("ask", "accept-new", "yes"),
        ("accept-new", "accept-new", "accept-new"),
        ("no", "accept-new", "accept-new"),
        ("accept-new", "yes", "yes"),
        ("no", "yes", "yes"),
    ],
)
def test_the_stricter_policy_wins(configured: str, requested: str, policy: str, tmp_path: Path) -> None:
    got, because = effective_policy(configured, requested)  # type: ignore[arg-type]
    assert got == policy and because
    target = tmp_path / "known_hosts"
    check = HostKeyCheck(ResolvedSsh("10.0.0.5", 22, "u"), got, (), str(target), because)
    added = check.decide("10.0.0.5", "ssh-ed25519", "AAAA", lambda _path: False)
    assert added is (policy == "accept-new") and target.exists() is added
    if not added:
        assert check.refusal == because


@pytest.mark.process
@pytest.mark.skipif(SSH is None, reason="needs OpenSSH's ssh")
@pytest.mark.parametrize(
    ("user_config", "policy"),
    [
        ("", "accept-new"),  # nothing set: our default, where ssh -G alone says "ask"
        ("Host web\n  StrictHostKeyChecking ask\n", "ask"),
        ("Host web\n  StrictHostKeyChecking yes\n", "yes"),
        ("Host *\n  StrictHostKeyChecking no\n", "no"),
    ],
)
def test_the_fallback_config_tells_ssh_s_default_from_ask(tmp_path: Path, user_config: str, policy: str) -> None:
    config = tmp_path / "my 'conf*g\""  # Include must read exactly this file: no glob, no unquoting
    config.write_text(user_config + "Host web\n  HostName 192.0.2.7\n")
    ours = tmp_path / "ours"
    ours.write_text(fallback_config_text(str(config), home=str(tmp_path), by="hostinv"))
    assert SSH is not None
    done = subprocess.run(
        [SSH, "-G", "-F", str(ours), "web"], stdin=subprocess.DEVNULL, capture_output=True, text=True, check=True
    )
    resolved = parse_ssh_g(done.stdout)
    assert (resolved.hostname, resolved.host_key_policy) == ("192.0.2.7", policy)


def test_the_fallback_config_includes_what_ssh_reads(tmp_path: Path) -> None:
    text = fallback_config_text(None, home="/home/u", by="hostinv")
    assert 'Include "/home/u/.ssh/config"' in text and 'Include "/etc/ssh/ssh_config"' in text
    assert "Include" not in fallback_config_text("none", home="/home/u", by="hostinv")
    # A relative -F file made absolute: an Include of a relative path would read it under ~/.ssh.
    assert included_files("rel/conf", home="/home/u") == [os.path.abspath("rel/conf")]
    with pytest.raises(ValueError, match="line breaks"):
        fallback_config_text("/a\nb", home="/home/u", by="hostinv")


# ---- ssh -G answers that depend on DNS are never kept --------------------------------------


@pytest.fixture
def counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return counted_ssh(tmp_path, monkeypatch)


@pytest.mark.anyio
@pytest.mark.process
@pytest.mark.parametrize(
    ("line", "options"),
    [
        ("", {}),  # kept: the control
        ("CanonicalizeHostname yes", {}),
        ("CanonicalizeHostname true", {}),
        ('CanonicalizeHostname "true"', {}),
        ("CanonicalizeHostname=always", {}),
        ("  canonicalizehostname = 'yes'", {}),
        ("", {"CanonicalizeHostname": "true"}),  # on the command line (an inventory's ssh_options)
    ],
)
async def test_an_answer_that_depends_on_dns_is_never_kept(
    tmp_path: Path, counted: Path, line: str, options: dict[str, str]
) -> None:
    config = tmp_path / "config"
    config.write_text(f"Host web\n  {line}\n  CanonicalDomains invalid\n  HostName 192.0.2.7\n")
    os.utime(config, (OLD, OLD))
    settings = ProbeSettings(ssh_config=str(config), resolve_cache=str(tmp_path / "cache"))
    for _ in range(3):
        assert (await _resolve("web", settings, options=options)).hostname == "192.0.2.7"
    kept = not line and not options
    assert runs(counted) == (1 if kept else 3)
