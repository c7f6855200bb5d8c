"""Inventory sources and the merged view of them.

Parsers are pure (text in, models out) and live in a module per source: :mod:`.own_file` (our
YAML), :mod:`.ssh_config`, :mod:`.ansible`; :mod:`.merge` joins them, and :mod:`.load` is the
only module that reads or writes files.
"""

from __future__ import annotations

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
from .merge import merge
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
