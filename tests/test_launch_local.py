"""The pure parts of the local launch target: command words, program lookup, workspace checks."""

from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from typing import TYPE_CHECKING

import anyio
import pytest

from remote_acp.errors import ErrorKind, RemoteAcpError
from remote_acp.masking import secret_values
from remote_acp.targets.launch import (
    MINIMAL_ENV,
    LaunchSpec,
    LocalTarget,
    check_local_workspace,
    command_argv,
    resolve_program,
)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


def prepare(target: LocalTarget, command: str | list[str], workspace: str) -> LaunchSpec:
    """LaunchTarget.prepare is async (an ssh target asks ssh for its config); run it here."""
    return anyio.run(target.prepare, command, workspace)


def make_program(directory: Path, name: str, *, executable: bool = True) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755 if executable else 0o644)
    return path


@contextmanager
def raises_kind(kind: ErrorKind, message: str) -> Iterator[pytest.ExceptionInfo[RemoteAcpError]]:
    """Expect a RemoteAcpError of ``kind`` whose message is exactly ``message`` (and no detail)."""
    with pytest.raises(RemoteAcpError) as info:
        yield info
    assert info.value.kind is kind
    assert info.value.message == message
    assert str(info.value) == message


# -- command_argv -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("gemini --acp", ["gemini", "--acp"]),
        ("kiro-cli acp -a", ["kiro-cli", "acp", "-a"]),
        ("  qwen   --acp  ", ["qwen", "--acp"]),
        ("'my agent' --flag=\"a b\" c\\ d", ["my agent", "--flag=a b", "c d"]),
        ("agent --empty ''", ["agent", "--empty", ""]),
        ("agent $HOME ~ *.py", ["agent", "$HOME", "~", "*.py"]),
        ("agent # not a comment", ["agent", "#", "not", "a", "comment"]),
        (["agent", "--opt", "two words"], ["agent", "--opt", "two words"]),
        (("agent", "x"), ["agent", "x"]),
        (["/opt/bin/agent"], ["/opt/bin/agent"]),
        (["agent", ""], ["agent", ""]),
    ],
)
def test_command_argv(command: str | list[str] | tuple[str, ...], argv: list[str]) -> None:
    assert command_argv(command) == argv


def test_command_list_is_copied_not_shared() -> None:
    command = ["agent", "--acp"]
    argv = command_argv(command)
    argv[0] = "/changed"
    assert command == ["agent", "--acp"]


def test_command_list_words_are_not_split() -> None:
    assert command_argv(["gemini --acp"]) == ["gemini --acp"]


@pytest.mark.parametrize("command", ["", "   ", "\t\n", [], [""], ["   "], ["", "--acp"], ("\t",)])
def test_empty_command_is_agent_not_found(command: str | list[str] | tuple[str, ...]) -> None:
    with raises_kind(ErrorKind.AGENT_NOT_FOUND, "the agent command is empty or whitespace-only"):
        command_argv(command)


def test_command_string_of_only_an_empty_quoted_word_is_empty() -> None:
    with raises_kind(ErrorKind.AGENT_NOT_FOUND, "the agent command is empty or whitespace-only"):
        command_argv("'' --acp")


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("gemini 'acp", "No closing quotation"),
        ('agent "x', "No closing quotation"),
        ("agent \\", "No escaped character"),
    ],
)
def test_unsplittable_command_is_agent_not_found(command: str, reason: str) -> None:
    with raises_kind(ErrorKind.AGENT_NOT_FOUND, f"the agent command cannot be split into words: {reason}") as info:
        command_argv(command)
    assert not info.value.retryable


# -- resolve_program ----------------------------------------------------------------------------


def test_bare_name_is_found_on_the_given_path(tmp_path: Path) -> None:
    program = make_program(tmp_path / "bin", "my-agent")
    assert resolve_program("my-agent", str(tmp_path / "bin")) == str(program)


def test_first_match_on_the_path_wins(tmp_path: Path) -> None:
    first = make_program(tmp_path / "a", "my-agent")
    make_program(tmp_path / "b", "my-agent")
    path = os.pathsep.join([str(tmp_path / "empty"), str(tmp_path / "a"), str(tmp_path / "b")])
    assert resolve_program("my-agent", path) == str(first)


def test_non_executable_match_is_skipped(tmp_path: Path) -> None:
    make_program(tmp_path / "a", "my-agent", executable=False)
    second = make_program(tmp_path / "b", "my-agent")
    path = os.pathsep.join([str(tmp_path / "a"), str(tmp_path / "b")])
    assert resolve_program("my-agent", path) == str(second)


def test_missing_bare_name_is_agent_not_found(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    with raises_kind(
        ErrorKind.AGENT_NOT_FOUND, "agent program 'no-such-agent' was not found on PATH or is not executable"
    ) as info:
        resolve_program("no-such-agent", str(tmp_path / "bin"))
    assert not info.value.retryable


def test_non_executable_bare_name_is_agent_not_found(tmp_path: Path) -> None:
    make_program(tmp_path / "bin", "my-agent", executable=False)
    with raises_kind(ErrorKind.AGENT_NOT_FOUND, "agent program 'my-agent' was not found on PATH or is not executable"):
        resolve_program("my-agent", str(tmp_path / "bin"))


def test_directory_with_the_programs_name_is_not_a_program(tmp_path: Path) -> None:
    (tmp_path / "bin" / "my-agent").mkdir(parents=True)
    with raises_kind(ErrorKind.AGENT_NOT_FOUND, "agent program 'my-agent' was not found on PATH or is not executable"):
        resolve_program("my-agent", str(tmp_path / "bin"))


def test_empty_search_path_finds_nothing(tmp_path: Path) -> None:
    with raises_kind(ErrorKind.AGENT_NOT_FOUND, "agent program 'sh' was not found on PATH or is not executable"):
        resolve_program("sh", "")


def test_absolute_path_is_used_as_is(tmp_path: Path) -> None:
    program = make_program(tmp_path / "elsewhere", "my-agent")
    assert resolve_program(str(program), str(tmp_path / "unrelated")) == str(program)


def test_missing_absolute_path_is_agent_not_found_without_mentioning_path(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope" / "agent")
    with raises_kind(ErrorKind.AGENT_NOT_FOUND, f"agent program {missing!r} was not found or is not executable"):
        resolve_program(missing, "/usr/bin")


def test_non_executable_absolute_path_is_agent_not_found(tmp_path: Path) -> None:
    program = make_program(tmp_path, "agent", executable=False)
    with raises_kind(ErrorKind.AGENT_NOT_FOUND, f"agent program {str(program)!r} was not found or is not executable"):
        resolve_program(str(program), None)


# -- check_local_workspace ----------------------------------------------------------------------


def test_existing_absolute_directory_is_accepted(tmp_path: Path) -> None:
    assert check_local_workspace(str(tmp_path)) == str(tmp_path)


def test_symlink_to_a_directory_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert check_local_workspace(str(tmp_path / "link")) == str(tmp_path / "link")


@pytest.mark.parametrize("workspace", ["", " ", "\t\n"])
def test_empty_workspace(workspace: str) -> None:
    with raises_kind(ErrorKind.INVALID_WORKSPACE_CWD, "the workspace path is empty") as info:
        check_local_workspace(workspace)
    assert not info.value.retryable


@pytest.mark.parametrize("workspace", ["relative/dir", ".", "./ws", "~/ws", "ws"])
def test_relative_workspace(workspace: str) -> None:
    with raises_kind(ErrorKind.INVALID_WORKSPACE_CWD, f"the workspace path {workspace!r} is not absolute"):
        check_local_workspace(workspace)


def test_missing_workspace(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing")
    with raises_kind(ErrorKind.INVALID_WORKSPACE_CWD, f"the workspace {missing!r} does not exist"):
        check_local_workspace(missing)


def test_dangling_symlink_workspace_does_not_exist(tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to(tmp_path / "gone")
    link = str(tmp_path / "link")
    with raises_kind(ErrorKind.INVALID_WORKSPACE_CWD, f"the workspace {link!r} does not exist"):
        check_local_workspace(link)


def test_file_as_workspace(tmp_path: Path) -> None:
    file = tmp_path / "file.txt"
    file.write_text("x")
    with raises_kind(ErrorKind.INVALID_WORKSPACE_CWD, f"the workspace {str(file)!r} is not a directory"):
        check_local_workspace(str(file))


# -- LocalTarget.prepare ------------------------------------------------------------------------


@pytest.fixture
def agent_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory holding an executable ``my-agent``, set as the whole PATH."""
    bin_dir = tmp_path / "bin"
    make_program(bin_dir, "my-agent")
    monkeypatch.setenv("PATH", str(bin_dir))
    return bin_dir


@pytest.fixture
def ws(tmp_path: Path) -> str:
    path = tmp_path / "ws"
    path.mkdir()
    return str(path)


def test_target_identity() -> None:
    target = LocalTarget()
    assert target.label == "local"
    assert target.remote is False


def test_prepare_builds_the_spec(agent_bin: Path, ws: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMOTE_ACP_TEST_API_KEY", "sk-test-0123456789")
    spec = prepare(LocalTarget(), "my-agent --acp 'two words'", ws)
    assert spec == LaunchSpec(
        argv=[str(agent_bin / "my-agent"), "--acp", "two words"],
        env=dict(os.environ),
        cwd=ws,
        target="local",
        remote=False,
        secrets=secret_values(dict(os.environ)),
    )
    assert "sk-test-0123456789" in spec.secrets


def test_prepare_gives_the_child_the_full_parent_environment(
    agent_bin: Path, ws: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOME_UNRELATED_VARIABLE", "kept")
    spec = prepare(LocalTarget(), ["my-agent"], ws)
    assert spec.env == dict(os.environ)
    assert spec.env["SOME_UNRELATED_VARIABLE"] == "kept"
    assert spec.env is not os.environ


def test_prepare_does_not_change_the_callers_list(agent_bin: Path, ws: str) -> None:
    command = ["my-agent", "--acp"]
    spec = prepare(LocalTarget(), command, ws)
    assert command == ["my-agent", "--acp"]
    assert spec.argv == [str(agent_bin / "my-agent"), "--acp"]


def test_prepare_with_an_absolute_program(tmp_path: Path, ws: str) -> None:
    program = make_program(tmp_path / "opt", "agent")
    spec = prepare(LocalTarget(), [str(program), "acp"], ws)
    assert spec.argv == [str(program), "acp"]


def _no_minimal_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only PATH and HOME of the minimal set are left, so the expected environments are exact."""
    for name in [*MINIMAL_ENV, *(k for k in os.environ if k.startswith("LC_"))]:
        if name not in ("PATH", "HOME"):
            monkeypatch.delenv(name, raising=False)


def test_env_allowlist_narrows_the_environment(agent_bin: Path, ws: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _no_minimal_env(monkeypatch)
    monkeypatch.setenv("HOME", "/home/someone")
    monkeypatch.setenv("KEEP_ME", "1")
    monkeypatch.setenv("DROP_ME", "2")
    monkeypatch.setenv("DROP_API_KEY", "sk-dropped-value")
    monkeypatch.delenv("ALSO_ALLOWED_BUT_UNSET", raising=False)
    spec = prepare(LocalTarget(env_allowlist=("KEEP_ME", "ALSO_ALLOWED_BUT_UNSET")), ["my-agent"], ws)
    assert spec.env == {"PATH": str(agent_bin), "HOME": "/home/someone", "KEEP_ME": "1"}
    assert spec.secrets == ()


def test_env_allowlist_keeps_the_minimal_set(agent_bin: Path, ws: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _no_minimal_env(monkeypatch)
    minimal = {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TERM": "dumb", "TMPDIR": "/tmp", "USER": "u"}
    for name, value in {**minimal, "GITHUB_TOKEN": "ghp-dropped"}.items():
        monkeypatch.setenv(name, value)
    spec = prepare(LocalTarget(env_allowlist=()), ["my-agent"], ws)
    assert {k: v for k, v in spec.env.items() if k not in ("PATH", "HOME")} == minimal


def test_extra_env_adds_and_overrides(agent_bin: Path, ws: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OVERRIDDEN", "old")
    target = LocalTarget(extra_env={"OVERRIDDEN": "new", "ADDED_TOKEN": "tok-abcdef"})
    spec = prepare(target, ["my-agent"], ws)
    assert spec.env["OVERRIDDEN"] == "new"
    assert spec.env["ADDED_TOKEN"] == "tok-abcdef"
    assert "tok-abcdef" in spec.secrets
    assert os.environ["OVERRIDDEN"] == "old"


def test_extra_env_applies_after_env_allowlist(agent_bin: Path, ws: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _no_minimal_env(monkeypatch)
    monkeypatch.setenv("HOME", "/root")
    target = LocalTarget(env_allowlist=(), extra_env={"ONLY_EXTRA": "x"})
    assert prepare(target, ["my-agent"], ws).env == {"PATH": str(agent_bin), "HOME": "/root", "ONLY_EXTRA": "x"}


def test_program_is_resolved_on_the_childs_path(tmp_path: Path, ws: str, monkeypatch: pytest.MonkeyPatch) -> None:
    other_bin = tmp_path / "other-bin"
    program = make_program(other_bin, "only-there")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    spec = prepare(LocalTarget(extra_env={"PATH": str(other_bin)}), ["only-there"], ws)
    assert spec.argv == [str(program)]


def test_without_path_the_default_search_path_is_used(ws: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PATH")
    assert os.defpath.split(os.pathsep)[0] == "/bin"
    spec = prepare(LocalTarget(), ["sh", "-c", "true"], ws)
    assert spec.argv == ["/bin/sh", "-c", "true"]
    assert "PATH" not in spec.env


def test_missing_program_is_agent_not_found(agent_bin: Path, ws: str) -> None:
    with raises_kind(ErrorKind.AGENT_NOT_FOUND, "agent program 'nope' was not found on PATH or is not executable"):
        prepare(LocalTarget(), "nope --acp", ws)


def test_prepare_with_an_empty_command_is_agent_not_found(agent_bin: Path, ws: str) -> None:
    with raises_kind(ErrorKind.AGENT_NOT_FOUND, "the agent command is empty or whitespace-only"):
        prepare(LocalTarget(), "  ", ws)


def test_bad_workspace_is_reported_before_a_bad_command(agent_bin: Path, tmp_path: Path) -> None:
    missing = str(tmp_path / "missing")
    with raises_kind(ErrorKind.INVALID_WORKSPACE_CWD, f"the workspace {missing!r} does not exist"):
        prepare(LocalTarget(), "", missing)
    with raises_kind(ErrorKind.INVALID_WORKSPACE_CWD, "the workspace path 'rel' is not absolute"):
        prepare(LocalTarget(), "nope", "rel")


def test_file_workspace_is_invalid(agent_bin: Path, tmp_path: Path) -> None:
    file = tmp_path / "f"
    file.write_text("")
    with raises_kind(ErrorKind.INVALID_WORKSPACE_CWD, f"the workspace {str(file)!r} is not a directory"):
        prepare(LocalTarget(), "my-agent", str(file))


def test_non_executable_program_is_agent_not_found(tmp_path: Path, ws: str, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    program = make_program(bin_dir, "my-agent", executable=False)
    assert not program.stat().st_mode & stat.S_IXUSR
    monkeypatch.setenv("PATH", str(bin_dir))
    with raises_kind(ErrorKind.AGENT_NOT_FOUND, "agent program 'my-agent' was not found on PATH or is not executable"):
        prepare(LocalTarget(), ["my-agent"], ws)


def test_relative_program_is_resolved_where_it_will_run(
    tmp_path: Path, ws: str, agent_bin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = make_program(tmp_path / "ws" / "tools", "local-agent")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    spec = prepare(LocalTarget(), ["./tools/local-agent", "--acp"], ws)
    assert spec.cwd == ws
    assert os.path.samefile(os.path.join(ws, spec.argv[0]), program)
    assert spec.argv[1:] == ["--acp"]


# -- NUL bytes: misconfigured, never retryable, refused before anything starts ------------------


def test_nul_in_the_workspace_is_invalid_workspace(agent_bin: Path, ws: str) -> None:
    with raises_kind(ErrorKind.INVALID_WORKSPACE_CWD, "the workspace path contains a NUL character") as info:
        prepare(LocalTarget(), ["my-agent"], ws + "\0/x")
    assert not info.value.retryable


@pytest.mark.parametrize("command", ["my-agent --x=\0", ["my-agent", "a\0b"]])
def test_nul_in_the_command_is_agent_not_found(agent_bin: Path, ws: str, command: str | list[str]) -> None:
    with raises_kind(ErrorKind.AGENT_NOT_FOUND, "the agent command contains a NUL character") as info:
        prepare(LocalTarget(), command, ws)
    assert not info.value.retryable


def test_nul_in_an_environment_value_is_agent_not_found_without_the_value(agent_bin: Path, ws: str) -> None:
    target = LocalTarget(extra_env={"MY_API_KEY": "sk-secret-value\0tail"})
    message = "the agent's environment gives MY_API_KEY a value with a NUL character"
    with raises_kind(ErrorKind.AGENT_NOT_FOUND, message) as info:
        prepare(target, ["my-agent"], ws)
    assert not info.value.retryable


@pytest.mark.parametrize("name", ["", "A=B", "A\0B"])
def test_an_environment_name_no_process_can_have_is_agent_not_found(agent_bin: Path, ws: str, name: str) -> None:
    message = "the agent's environment has a variable name that cannot be set"
    with raises_kind(ErrorKind.AGENT_NOT_FOUND, message):
        prepare(LocalTarget(extra_env={name: "v"}), ["my-agent"], ws)
