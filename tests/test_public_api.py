"""The public surface: every name in ``__all__`` resolves, and importing the package stays cheap."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pytest

import remote_acp


@pytest.mark.parametrize("name", remote_acp.__all__)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(remote_acp, name) is not None


def test_all_is_sorted_and_unique() -> None:
    assert len(set(remote_acp.__all__)) == len(remote_acp.__all__)
    assert list(remote_acp.__all__) == sorted(remote_acp.__all__)


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        remote_acp.nope  # noqa: B018


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
