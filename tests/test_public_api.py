"""The public surface: every name in ``__all__`` resolves, and importing the package stays cheap."""

from __future__ import annotations

import importlib
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import hostinv
import remote_acp

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", remote_acp.__all__)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(remote_acp, name) is not None


def test_all_is_sorted_and_unique() -> None:
    assert len(set(remote_acp.__all__)) == len(remote_acp.__all__)
    assert list(remote_acp.__all__) == sorted(remote_acp.__all__)


def test_unknown_attribute_is_an_attribute_error() -> None:
    name = "nope"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        getattr(remote_acp, name)


@pytest.mark.parametrize(
    "module", [m.name for m in pkgutil.walk_packages(remote_acp.__path__, "remote_acp.") if "testing" not in m.name]
)
def test_every_module_declares_all(module: str) -> None:
    mod = importlib.import_module(module)
    exported = getattr(mod, "__all__", None)
    assert exported is not None, f"{module} has no __all__"
    for name in exported:
        assert hasattr(mod, name), f"{module}.__all__ names {name}, which it does not define"


def test_importing_the_package_loads_nothing_heavy() -> None:
    code = "import sys, remote_acp; print(sorted(m for m in ('pydantic', 'anyio', 'asyncio') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_public_names_are_typed_and_a_misspelt_one_fails_type_checking(tmp_path: Path) -> None:
    """Runs mypy in a subprocess on a small file using both packages, as an application would:
    every public name has its own type (the lazy ``__getattr__`` is invisible to the checker, or
    each name would be ``object``), and a misspelt name is an error."""
    lines = ["import hostinv", "import remote_acp"]
    lines += [f"reveal_type(remote_acp.{name})" for name in remote_acp.__all__]
    lines += [f"reveal_type(hostinv.{name})" for name in hostinv.__all__]
    lines += ["remote_acp.opne_session", "hostinv.load_inventroy"]
    app = tmp_path / "app.py"
    app.write_text("\n".join(lines) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), str(app)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    revealed = re.findall(r'^.*app\.py:(\d+): note: Revealed type is "(.*)"$', done.stdout, re.MULTILINE)
    assert len(revealed) == len(remote_acp.__all__) + len(hostinv.__all__), done.stdout
    untyped = [lines[int(line) - 1] for line, revealed_type in revealed if revealed_type in ("object", "Any")]
    assert not untyped, done.stdout
    errors = [line for line in done.stdout.splitlines() if ": error: " in line]
    assert len(errors) == 2, done.stdout
    assert 'Module has no attribute "opne_session"' in errors[0]
    assert 'Module has no attribute "load_inventroy"' in errors[1]
