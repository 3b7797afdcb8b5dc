"""A bundle's YAML as plain data, with the line of each key path, read within bounds.

libyaml (``yaml.CSafeLoader``) parses; before any node tree is built, one pass over the
parser's events measures the document: collections nested deeper than ``MAX_DEPTH`` are
refused (the reader recurses), and so is a document of more than ``MAX_NODES`` keys and
values once every alias is counted as all that its anchor holds. A "billion laughs" of a
few hundred bytes is refused at its first alias past the bound, in constant memory, and
never expanded. Only plain data is read: a tag that would build anything else
(``!!python/object``, ``!!binary``, ``!!set``) is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

MAX_NODES = 100_000  # keys and values: 3,000 paper rows of 15 scores (the repository's bundles hold < 2,000)
MAX_DEPTH = 16  # collections open at once; a bundle's shape needs 6
PLAIN_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "timestamp", "map", "seq")}

Key = tuple[str | int, ...]


def key_path(path: Key) -> str:
    """``splits[0].phases.deadline`` for ``("splits", 0, "phases", "deadline")``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top)"


class Reader:
    """Plain data from a YAML node tree, with each key path's line (1-based), and the problems found."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.lines: dict[Key, int] = {}
        self.problems: list[str] = []
        self._scalars = yaml.CSafeLoader("")

    def problem(self, path: Key, message: str, line: int | None = None) -> None:
        self.problems.append(f"{self.name}:{line or self.line(path)}: {key_path(path)}: {message}")

    def line(self, path: Key) -> int:
        while path not in self.lines and path:
            path = path[:-1]
        return self.lines.get(path, 1)

    def data(self, node: yaml.Node, path: Key = ()) -> Any:
        self.lines.setdefault(path, node.start_mark.line + 1)
        if node.tag not in PLAIN_TAGS:
            shown = node.tag.replace("tag:yaml.org,2002:", "!!")
            self.problem(path, f"the tag {shown} is not allowed; expected plain data (text, numbers, true/false, "
                               f"null, lists and mappings)")
            return None
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                key = str(self.data(key_node, path))
                if key in out:
                    self.lines[(*path, key)] = key_node.start_mark.line + 1
                    self.problem((*path, key), "the key is given twice")
                self.lines[(*path, key)] = key_node.start_mark.line + 1
                out[key] = self.data(value_node, (*path, key))
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.data(item, (*path, i)) for i, item in enumerate(node.value)]
        if node.tag == "tag:yaml.org,2002:timestamp":
            return node.value  # checked as text by the schema, read by ``bundles.moment``
        try:
            return self._scalars.construct_object(node)
        except (yaml.YAMLError, ValueError) as exc:  # a tag its text does not fit: ``!!int x``
            self.problem(path, f"not plain data: {getattr(exc, 'problem', None) or exc}")
            return None


@dataclass
class _Open:
    """A collection being read: where it is, and where its reading is."""

    mapping: bool
    anchor: str | None
    start: int  # nodes counted before it
    path: Key
    key: str | int = 0  # a mapping's current key; a sequence's next index
    at_key: bool = True  # a mapping: the next node is a key


def _place(stack: list[_Open]) -> Key:
    """The key path of the next node."""
    if not stack:
        return ()
    top = stack[-1]
    return top.path if top.mapping and top.at_key else (*top.path, top.key)


def _ended(stack: list[_Open], value: Any) -> None:
    """A node of the innermost collection was read (``value``: a scalar's text, else None)."""
    if not stack:
        return
    top = stack[-1]
    if not top.mapping:
        top.key = int(top.key) + 1
    elif top.at_key:
        top.key, top.at_key = str(value) if value is not None else "?", False
    else:
        top.at_key = True


def measure(text: str, reader: Reader) -> bool:
    """Whether the document is within ``MAX_DEPTH`` and ``MAX_NODES``; else the first problem is noted.
    ``yaml.YAMLError`` for text that is not YAML."""
    sizes: dict[str, int] = {}  # anchor -> the nodes it stands for, once its node has ended
    stack: list[_Open] = []
    total = 0
    for event in yaml.parse(text, Loader=yaml.CSafeLoader):
        line = event.start_mark.line + 1
        if isinstance(event, yaml.CollectionEndEvent):
            done = stack.pop()
            if done.anchor:
                sizes[done.anchor] = total - done.start
            _ended(stack, None)
            continue
        if not isinstance(event, yaml.NodeEvent):
            continue  # the stream's and documents' starts and ends
        path = _place(stack)
        if isinstance(event, yaml.AliasEvent):
            anchor = str(event.anchor)
            if anchor not in sizes:
                inside = any(o.anchor == anchor for o in stack)
                reader.problem(path, f"the alias *{anchor} refers to a collection that contains it; expected plain "
                                     f"data" if inside else f"the alias *{anchor} has no anchor &{anchor} before it",
                               line)
                return False
            total += sizes[anchor]
            if total > MAX_NODES:
                reader.problem(path, f"the alias *{anchor} stands for {sizes[anchor]:,} YAML nodes, which takes the "
                                     f"bundle past {MAX_NODES:,} (an alias counts as all it repeats); expected a "
                                     f"bundle that spells out what it declares", line)
                return False
            _ended(stack, None)
            continue
        total += 1
        if isinstance(event, yaml.ScalarEvent):
            if event.anchor:
                sizes[event.anchor] = 1
            _ended(stack, event.value)
        else:  # a mapping or a sequence starts
            if len(stack) >= MAX_DEPTH:
                reader.problem(path, f"nested deeper than {MAX_DEPTH} levels; expected a bundle's shape (see the "
                                     f"schema)", line)
                return False
            stack.append(_Open(isinstance(event, yaml.MappingStartEvent), event.anchor, total - 1, path))
        if total > MAX_NODES:
            reader.problem(path, f"more than {MAX_NODES:,} YAML nodes; expected a bundle of far fewer", line)
            return False
    return True


def read_plain(text: str, reader: Reader) -> Any:
    """The document of ``text`` as plain data (None where it has problems, noted on ``reader``)."""
    try:
        if not measure(text, reader):
            return None
        node = yaml.compose(text, Loader=yaml.CSafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        reader.problems.append(f"{reader.name}:{mark.line + 1 if mark else 1}: not YAML: {exc}")
        return None
    if node is None:
        reader.problems.append(f"{reader.name}:1: the file is empty; expected a bundle (see the schema)")
        return None
    return reader.data(node)
