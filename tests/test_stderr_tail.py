"""StderrTail: a bounded tail of the agent's stderr with secret-looking values masked."""

from __future__ import annotations

import pytest

from remote_acp.masking import MASK, mask_secrets, secret_values
from remote_acp.targets.exit_status import ExitStatus
from remote_acp.targets.ssh.errors import is_ssh_chatter, ssh_exit_error
from remote_acp.targets.ssh.settings import SshSettings
from remote_acp.targets.ssh.target import SshTarget
from remote_acp.targets.stderr_tail import StderrTail


def test_mask_is_three_stars() -> None:
    assert MASK == "***"


# -- secret_values ------------------------------------------------------------------------------


def test_secret_values_picks_secret_looking_names() -> None:
    env = {
        "OPENAI_API_KEY": "sk-0123456789",
        "GITHUB_TOKEN": "ghp_abcdefgh",
        "DB_PASSWORD": "hunter22",
        "CLIENT_SECRET": "s3cr3t!",
        "HOME": "/root",
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
    }
    assert secret_values(env) == ("sk-0123456789", "ghp_abcdefgh", "hunter22", "s3cr3t!")


@pytest.mark.parametrize(
    "name",
    [
        "API_KEY",
        "api_key",
        "MyKey",
        "ACCESS_TOKEN",
        "token",
        "AWS_SECRET_ACCESS_KEY",
        "PASSWORD",
        "MYSQL_PASSWD",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "SESSION_COOKIE",
        "AUTH_HEADER",
        "OAUTH",
    ],
)
def test_secret_looking_names(name: str) -> None:
    assert secret_values({name: "value-1234"}) == ("value-1234",)


@pytest.mark.parametrize("name", ["HOME", "PATH", "USER", "SHELL", "TERM", "LANG", "EDITOR", "PWD"])
def test_ordinary_names_are_not_secrets(name: str) -> None:
    assert secret_values({name: "value-1234"}) == ()


@pytest.mark.parametrize(("value", "kept"), [("", False), ("a", False), ("abc", False), ("abcd", True)])
def test_values_shorter_than_four_are_not_masked(value: str, kept: bool) -> None:
    assert secret_values({"API_KEY": value}) == ((value,) if kept else ())


def test_secret_values_are_deduplicated_and_longest_first() -> None:
    env = {"A_KEY": "abcd", "B_TOKEN": "abcdefgh", "C_SECRET": "abcd", "D_PASSWORD": "abcdef"}
    assert secret_values(env) == ("abcdefgh", "abcdef", "abcd")


# -- mask_secrets -------------------------------------------------------------------------------


def test_mask_secrets_replaces_every_occurrence() -> None:
    assert mask_secrets("key=sk-123 again sk-123.", ["sk-123"]) == "key=*** again ***."


def test_mask_secrets_without_secrets_is_identity() -> None:
    assert mask_secrets("nothing to hide", []) == "nothing to hide"
    assert mask_secrets("nothing to hide", ["absent"]) == "nothing to hide"


def test_overlapping_secrets_mask_fully_when_longest_first() -> None:
    secrets = secret_values({"LONG_KEY": "abcdefgh", "SHORT_KEY": "abcd"})
    assert mask_secrets("x abcdefgh y abcd z", secrets) == "x *** y *** z"


# -- StderrTail ---------------------------------------------------------------------------------


def test_empty_tail() -> None:
    tail = StderrTail()
    assert tail.lines() == []
    assert tail.report() == "no standard-error output"
    assert tail.total_bytes == 0


def test_lines_are_kept_and_joined_in_the_report() -> None:
    tail = StderrTail()
    tail.feed(b"first line\nsec")
    tail.feed(b"ond line\n")
    tail.feed(b"unterminated")
    assert tail.lines() == ["first line", "second line", "unterminated"]
    assert tail.report() == "first line | second line | unterminated"
    assert tail.total_bytes == 35


def test_blank_lines_are_dropped_and_carriage_returns_stripped() -> None:
    tail = StderrTail()
    tail.feed(b"\n\n  \r\nwindows line\r\n\t\nlast\r\n")
    assert tail.lines() == ["windows line", "last"]


def test_only_blank_output_reads_as_none() -> None:
    tail = StderrTail()
    tail.feed(b"\n \n\r\n")
    assert tail.lines() == []
    assert tail.report() == "no standard-error output"
    assert tail.total_bytes == 5


def test_invalid_utf8_is_replaced() -> None:
    tail = StderrTail()
    tail.feed(b"bad \xff byte\n")
    assert tail.lines() == ["bad \ufffd byte"]


def test_secrets_are_masked_in_lines_and_report() -> None:
    tail = StderrTail(secrets=secret_values({"OPENAI_API_KEY": "sk-live-abcdef", "HOME": "/root"}))
    tail.feed(b"Error: invalid key sk-live-abcdef for /root\n")
    assert tail.lines() == ["Error: invalid key *** for /root"]
    assert tail.report() == "Error: invalid key *** for /root"


def test_secret_split_across_feeds_is_still_masked() -> None:
    tail = StderrTail(secrets=["sk-live-abcdef"])
    tail.feed(b"key sk-li")
    tail.feed(b"ve-abcdef end\n")
    assert tail.report() == "key *** end"


def test_secrets_can_be_set_after_creation() -> None:
    tail = StderrTail()
    tail.feed(b"token=tok-9999\n")
    tail.secrets = ("tok-9999",)
    assert tail.report() == "token=***"


def test_tail_keeps_only_the_last_bytes_and_says_so() -> None:
    tail = StderrTail(limit=16)
    tail.feed(b"line-1\nline-2\nline-3\nline-4\n")  # 28 bytes; the last 16 begin inside "line-2"
    assert tail.lines() == ["line-3", "line-4"]
    assert tail.report() == "[earlier output omitted] line-3 | line-4"
    assert tail.total_bytes == 28


def test_a_line_cut_by_the_bound_is_dropped_so_no_secret_is_half_kept() -> None:
    tail = StderrTail(limit=20, secrets=["SECRETVALUE123"])
    # The bound falls inside the secret: the half-kept line must not show its tail end.
    tail.feed(b"key=SECRETVALUE123\nok\n")  # 22 bytes; the last 20 start at "CRETVALUE123"
    assert tail.lines() == ["ok"]
    assert tail.report() == "[earlier output omitted] ok"
    assert "VALUE123" not in tail.report()


def test_cut_tail_without_a_complete_line() -> None:
    tail = StderrTail(limit=8)
    tail.feed(b"x" * 100)
    assert tail.lines() == []
    assert tail.report() == "earlier standard-error output omitted"
    assert tail.total_bytes == 100


def test_default_bound_is_8_kib() -> None:
    tail = StderrTail()
    for n in range(2000):
        tail.feed(f"stderr line number {n:05d}\n".encode())  # 25 bytes each, 50,000 in all
    lines = tail.lines()
    assert tail.total_bytes == 50_000
    assert sum(len(line) + 1 for line in lines) <= 8192
    assert lines[-1] == "stderr line number 01999"
    # 8192 bytes hold 327 whole lines and part of one more, which is dropped.
    assert len(lines) == 327
    assert lines[0] == "stderr line number 01673"
    assert tail.report().startswith("[earlier output omitted] stderr line number 01673 | ")


def test_flood_keeps_memory_bounded_and_the_tail_current() -> None:
    tail = StderrTail(limit=64)
    for _ in range(10_000):
        tail.feed(b"noise noise noise\n")
    tail.feed(b"the real error\n")
    assert tail.lines()[-1] == "the real error"
    assert tail.total_bytes == 10_000 * 18 + 15
    assert len(tail.report()) < 200


def test_lines_can_be_read_repeatedly_and_feeding_goes_on() -> None:
    tail = StderrTail(limit=12)
    tail.feed(b"aaaa\nbbbb\n")
    assert tail.lines() == ["aaaa", "bbbb"]
    assert tail.lines() == ["aaaa", "bbbb"]
    tail.feed(b"cccc\n")
    assert tail.lines() == ["bbbb", "cccc"]
    assert tail.report() == "[earlier output omitted] bbbb | cccc"


def test_complete_line_right_after_the_cut_is_kept() -> None:
    tail = StderrTail(limit=10)
    tail.feed(b"aaaaaaaaa\nbbbbbbbbb\n")  # the last 10 bytes are exactly the complete line b"bbbbbbbbb\n"
    assert tail.lines() == ["bbbbbbbbb"]
    assert tail.report() == "[earlier output omitted] bbbbbbbbb"


# -- a launcher's chatter -----------------------------------------------------------------------

AUTHENTICATED = 'Authenticated to build-01 ([10.0.0.5]:22) using "publickey".'
TRANSFERRED = "Transferred: sent 2904, received 2744 bytes, in 0.1 seconds"
PER_SECOND = "Bytes per second: sent 31221.5, received 29501.4"
ADDED = "Warning: Permanently added 'build-01' (ED25519) to the list of known hosts."


def ssh_tail(*lines: str, limit: int = 8192) -> StderrTail:
    tail = StderrTail(limit, chatter=is_ssh_chatter)
    tail.feed("".join(f"{line}\n" for line in lines).encode())
    return tail


def test_chatter_is_kept_apart_from_the_lines_and_the_report() -> None:
    tail = ssh_tail(ADDED, AUTHENTICATED, "fatal: no key sk-123456789", TRANSFERRED, PER_SECOND)
    tail.secrets = ("sk-123456789",)
    assert tail.lines() == ["fatal: no key ***"]
    assert tail.chatter_lines() == [ADDED, AUTHENTICATED, TRANSFERRED, PER_SECOND]
    report = tail.report()
    assert report == "fatal: no key ***"
    assert report.whole == f"{ADDED} | {AUTHENTICATED} | fatal: no key *** | {TRANSFERRED} | {PER_SECOND}"
    assert type(f"{report}") is str and type(str(report)) is str  # the chatter goes no further


def test_a_tail_of_chatter_alone_reports_no_output() -> None:
    report = ssh_tail(AUTHENTICATED, TRANSFERRED).report()
    assert report == "no standard-error output"
    assert report.whole == f"{AUTHENTICATED} | {TRANSFERRED}"


def test_a_cut_tail_says_so_with_or_without_its_chatter() -> None:
    tail = ssh_tail("x" * 50, AUTHENTICATED, "boom", limit=len(AUTHENTICATED) + 10)
    report = tail.report()
    assert report == "[earlier output omitted] boom"
    assert report.whole == f"[earlier output omitted] {AUTHENTICATED} | boom"


def test_without_a_chatter_rule_every_line_is_shown() -> None:
    tail = StderrTail()
    tail.feed(f"{AUTHENTICATED}\nboom\n".encode())
    assert tail.lines() == [AUTHENTICATED, "boom"]
    assert tail.report() == tail.report().whole == f"{AUTHENTICATED} | boom"
    assert tail.chatter_lines() == []


def test_the_chatter_rule_keeps_ssh_reasons() -> None:
    assert is_ssh_chatter('Authenticated using "publickey" with partial success.')
    for reason in (
        "ssh: connect to host 10.0.0.5 port 22: Connection refused",
        "root@10.0.0.5: Permission denied (publickey).",
        "Host key verification failed.",
        "Connection to build-01 closed by remote host.",
        "fatal: Authenticated to nothing",  # the agent's own words, not ssh's line
    ):
        assert not is_ssh_chatter(reason)


@pytest.mark.parametrize(
    ("code", "lines"),
    [
        (127, (ADDED, AUTHENTICATED, "sh: 1: gemini: not found", TRANSFERRED, PER_SECOND)),
        (255, (ADDED, "root@10.0.0.5: Permission denied (publickey).")),
        (3, (AUTHENTICATED, "fatal: no key", TRANSFERRED)),
    ],
)
def test_the_ssh_target_reads_the_chatter_and_shows_none(code: int, lines: tuple[str, ...]) -> None:
    report = ssh_tail(*lines).report()
    target = SshTarget("build-01", SshSettings())
    status = ExitStatus(code)
    # What ssh's end means is read with the chatter, as from the whole tail...
    expected = ssh_exit_error("build-01", status, agent_wrote=False, stderr=report.whole, ready=True)
    assert (expected is None) == (code == 3)  # an agent's own exit after the login reads as any other
    got = target.exit_error(status, agent_wrote=False, stderr=report, ready=True)
    if expected is None:
        assert got is None
        return
    assert got is not None
    assert (got.kind, got.cause, got.message, got.facts) == (
        expected.kind,
        expected.cause,
        expected.message,
        expected.facts,
    )
    # ...and shown without it (no detail at all when ssh's one reason is in the message already).
    assert got.detail == (report if expected.detail else "")
    assert not [line for line in (*lines,) if is_ssh_chatter(line) and line in str(got)]


def test_watched_lines_are_handed_on_whole_as_they_arrive_across_reads() -> None:
    seen: list[bytes] = []
    tail = StderrTail(64)
    tail.watch_lines(b"RA-END", seen.append)
    tail.feed(b"noise\nRA-EN")
    assert seen == []
    tail.feed(b"D out=5 rc=0\nRA-ENDING is not\nx RA-END out=1\n")
    assert seen == [b"RA-END out=5 rc=0", b"RA-ENDING is not"]


def test_a_runaway_watched_line_is_dropped_and_memory_stays_bounded() -> None:
    seen: list[bytes] = []
    tail = StderrTail(64)
    tail.watch_lines(b"RA-END", seen.append)
    tail.feed(b"RA-END " + b"x" * 10_000)
    tail.feed(b"y" * 10_000 + b"\nRA-END out=1 rc=0\n")
    assert seen == [b"RA-END out=1 rc=0"]
    assert len(tail._line) == 0


def test_the_rest_of_a_runaway_line_is_no_watched_line_whatever_it_holds() -> None:
    # Cut at the bound, the rest of a long line must not pass for a line of its own: a report
    # forged at just the right distance into it is no report.
    seen: list[bytes] = []
    tail = StderrTail(64)
    tail.watch_lines(b"RA-END", seen.append)
    tail.feed(b"agent: " + b"x" * 4090)
    tail.feed(b"RA-END out=0 rc=0\nRA-END out=9 rc=1\n")
    assert seen == [b"RA-END out=9 rc=1"]
