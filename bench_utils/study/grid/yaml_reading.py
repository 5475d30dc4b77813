"""Reading a grid file's YAML strictly: UTF-8 only, a key given twice is an error (PyYAML would keep the last one
without a word), and so is a document whose aliases expand beyond any grid's size (a "billion laughs" document
loads small, but walking or quoting it would not end: it is refused before it is built).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ...errors import UserError


class GridFileError(UserError):
    """The grid file cannot be read as YAML; the message names the file."""


class _StrictLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a mapping key given twice."""


def _mapping_without_duplicates(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False):
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        line = key_node.start_mark.line + 1
        if key in seen:
            raise GridFileError(f"line {line}: key {key!r} is given twice (first on line {seen[key]})")
        seen[key] = line
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)


MAX_VALUES = 100_000  # values a grid file may expand to through its aliases (the guide's grid: under 100)


def _expanded_size(node: yaml.Node, sizes: dict[int, int]) -> int:
    """How many values ``node`` holds once its aliases are expanded (each node counted once per reference)."""
    if id(node) not in sizes:
        sizes[id(node)] = 0  # an alias of an enclosing node (a cycle) counts as one value
        children = ([child for pair in node.value for child in pair] if isinstance(node, yaml.MappingNode)
                    else node.value if isinstance(node, yaml.SequenceNode) else [])
        sizes[id(node)] = min(1 + sum(_expanded_size(child, sizes) for child in children), MAX_VALUES + 1)
    return sizes[id(node)]


def _load(text: str) -> Any:
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is not None and _expanded_size(node, {}) > MAX_VALUES:
            raise GridFileError(f"its aliases expand to more than {MAX_VALUES:,} values: not a grid (a YAML "
                                "anchor bomb?)")
        return loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()


def read_yaml(path: str | Path) -> Any:
    """The YAML document of ``path``; GridFileError naming the file for any reason it cannot be read."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as exc:
        raise GridFileError(f"{path}: cannot read the grid file ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise GridFileError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason}); "
                            "save the grid file as UTF-8") from None
    try:
        return _load(text)  # a SafeLoader
    except GridFileError as exc:
        raise GridFileError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "YAML"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise GridFileError(f"{path}: {where}: not valid YAML ({problem})") from None
