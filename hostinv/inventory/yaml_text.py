"""YAML as the inventories read it: ``safe_load`` only, and errors that point at a line.

pyyaml gives a line for syntax errors (its marks); pydantic gives a key path (``loc``) for values
of the wrong shape. :func:`line_of` joins the two: it walks the composed node tree along the key
path, so a bad port is reported at the line that holds it, not only by its path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import yaml

from ..errors import InventoryInvalid

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pydantic import ValidationError

__all__ = ["MAX_EXPANDED_NODES", "invalid_from_validation", "key_path", "line_of", "load_yaml"]

MAX_EXPANDED_NODES: Final = 1_000_000
"""Most nodes a document may hold with every alias expanded: ample for the largest inventory
the host caps allow (10,000 hosts with their variables), far below what makes a walk hurt."""


def load_yaml(text: str, source: str) -> object:
    """The document in ``text`` (``None`` when empty), loaded with ``safe_load``.

    :raises InventoryInvalid: a syntax error, with the line pyyaml reports.
    """
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node, source)
        return loader.construct_document(node)
    except RecursionError:
        raise InventoryInvalid(source, "the document is nested too deeply to read") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        reason = " ".join(part for part in (exc.context, exc.problem) if part) or "not valid YAML"
        raise InventoryInvalid(source, reason, line=None if mark is None else mark.line + 1) from None
    except yaml.YAMLError as exc:  # no mark: an encoding or reader error
        raise InventoryInvalid(source, str(exc)) from None
    finally:
        loader.dispose()


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_expansion(root: yaml.Node, source: str) -> None:
    """Refuse a document whose alias-expanded size is over :data:`MAX_EXPANDED_NODES`.

    Each distinct node is visited once (an alias is the very node it names), sizes memoized, so
    the check costs the document's size, not its expansion. Iterative: no depth limit of its own.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # started, not finished: the ancestors of what is visited
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            open_nodes.discard(key)
            size = 1 + sum(sizes[id(child)] for child in _children(node))
            if size > MAX_EXPANDED_NODES:
                raise InventoryInvalid(
                    source,
                    f"with its aliases expanded, this value holds over {MAX_EXPANDED_NODES} nodes",
                    line=node.start_mark.line + 1,
                )
            sizes[key] = size
        elif key in open_nodes:
            raise InventoryInvalid(source, "an alias refers to a value that contains it", line=node.start_mark.line + 1)
        elif key not in sizes:
            if isinstance(node, yaml.MappingNode):
                _no_duplicate_keys(node, source)
            open_nodes.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in _children(node))


def _no_duplicate_keys(node: yaml.MappingNode, source: str) -> None:
    """Refuse a key said twice in one mapping: YAML would keep the last silently (a host named
    twice, its first entry lost)."""
    seen: dict[str, int] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
            continue
        line = key_node.start_mark.line + 1
        first = seen.setdefault(key_node.value, line)
        if first != line:
            raise InventoryInvalid(
                source, f"the key {key_node.value!r} is given twice (lines {first} and {line}): say it once", line=line
            )


def line_of(text: str, loc: Sequence[str | int]) -> int | None:
    """The 1-based line of the value at ``loc`` in the YAML ``text``, as far down as the path exists.

    A key the path names but the text lacks (a required field left out) gives the line of the
    mapping that should hold it.
    """
    try:
        node: yaml.Node | None = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    line = None
    for part in loc:
        if node is None:
            break
        line = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            pair = next(
                (kv for kv in node.value if isinstance(kv[0], yaml.ScalarNode) and kv[0].value == str(part)), None
            )
            if pair is not None:
                line = pair[0].start_mark.line + 1  # the key's line; a block value starts below it
            node = None if pair is None else pair[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            node = None
    return line


def key_path(loc: Sequence[str | int]) -> str:
    """``('hosts', 'build-1', 'port')`` as ``hosts.build-1.port`` (list indices as ``[0]``)."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def invalid_from_validation(
    exc: ValidationError, source: str, text: str, *, prefix: Sequence[str | int] = ()
) -> InventoryInvalid:
    """The first error of ``exc`` as an :class:`InventoryInvalid` naming its key path and line."""
    first = exc.errors(include_url=False)[0]
    loc = (*prefix, *(p for p in first["loc"] if isinstance(p, (str, int))))
    return InventoryInvalid(source, first["msg"], line=line_of(text, loc), key=key_path(loc) or None)
