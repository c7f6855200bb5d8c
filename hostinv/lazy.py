"""A package's names imported on first use (PEP 562): importing the package itself costs nothing.

Public so that ``remote_acp``, which exports its names the same way, shares this one mechanism.
A package lists where each name lives (``homes``: name to submodule) and binds what
:func:`lazy_exports` returns as its module ``__getattr__`` and ``__dir__``.
"""

from __future__ import annotations

from importlib import import_module

# Not typing.TYPE_CHECKING: importing typing would be much of what ``import hostinv`` costs.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

__all__ = ["export", "lazy_exports"]


def export(package: str, homes: Mapping[str, str], namespace: dict[str, Any], name: str) -> object:
    """``package``'s ``name``, imported from its submodule ``homes[name]`` and kept in ``namespace``
    (the package's globals), so the next lookup finds it there.

    :raises AttributeError: ``name`` is not one of ``homes``.
    """
    module = homes.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(import_module(f".{module}", package), name)
    namespace[name] = value
    return value


def lazy_exports(
    package: str, homes: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose globals are ``namespace``: a name
    of ``homes`` is imported (:func:`export`) when first asked for; ``__dir__`` lists ``__all__``."""

    def __getattr__(name: str) -> object:
        return export(package, homes, namespace, name)

    def __dir__() -> list[str]:
        return sorted(namespace["__all__"])

    return __getattr__, __dir__
