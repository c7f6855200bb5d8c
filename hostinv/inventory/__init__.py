"""Inventory sources and the merged view of them.

Parsers are pure (text in, models out) and live in a module per source: :mod:`.own_file` (our
YAML), :mod:`.ssh_config`, :mod:`.ansible`; :mod:`.merge` joins them, and :mod:`.load` is the
only module that reads or writes files.

The names below are imported on first use, and :mod:`.load` imports a source's parser only when
that source is there: a fleet command whose inventory is an ssh_config alone loads neither YAML
nor the Ansible parser.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

# Not on first use: importing the module ``merge`` would bind the package's ``merge`` to it, not
# to the function. It costs little: the models are dataclasses.
from .merge import merge

if TYPE_CHECKING:
    from .ansible import expand_host_range, parse_ansible, parse_ansible_ini, parse_ansible_yaml
    from .load import (
        INVENTORY_ENV,
        default_inventory_path,
        load_ansible,
        load_inventory,
        load_ssh_config,
        read_text,
        write_text,
    )
    from .own_file import OwnFile, dump_inventory_yaml, parse_inventory_yaml
    from .ssh_config import IncludeReader, parse_ssh_config

__all__ = (
    "INVENTORY_ENV",
    "IncludeReader",
    "OwnFile",
    "default_inventory_path",
    "dump_inventory_yaml",
    "expand_host_range",
    "load_ansible",
    "load_inventory",
    "load_ssh_config",
    "merge",
    "parse_ansible",
    "parse_ansible_ini",
    "parse_ansible_yaml",
    "parse_inventory_yaml",
    "parse_ssh_config",
    "read_text",
    "write_text",
)

_HOME = {
    **dict.fromkeys(("expand_host_range", "parse_ansible", "parse_ansible_ini", "parse_ansible_yaml"), "ansible"),
    **dict.fromkeys(
        (
            "INVENTORY_ENV",
            "default_inventory_path",
            "load_ansible",
            "load_inventory",
            "load_ssh_config",
            "read_text",
            "write_text",
        ),
        "load",
    ),
    **dict.fromkeys(("OwnFile", "dump_inventory_yaml", "parse_inventory_yaml"), "own_file"),
    **dict.fromkeys(("IncludeReader", "parse_ssh_config"), "ssh_config"),
}


# For the interpreter only, so a type checker flags a misspelt name instead of typing it ``object``.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(__name__, _HOME, globals())
