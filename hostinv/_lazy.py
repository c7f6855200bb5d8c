"""A package's names imported on first use (PEP 562): importing the package itself costs nothing."""

from __future__ import annotations

from importlib import import_module

# Not typing.TYPE_CHECKING: importing typing would be much of what ``import hostinv`` costs.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, homes: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose globals are ``namespace``: a name
    of ``homes`` is imported from the submodule ``homes[name]`` when first asked for, and kept."""

    def __getattr__(name: str) -> object:
        module = homes.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(f".{module}", package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(namespace["__all__"])

    return __getattr__, __dir__
