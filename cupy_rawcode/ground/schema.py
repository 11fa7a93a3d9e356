"""One checker for the JSON that prebuild and warmup are handed (record lines, manifest entries):
each field's type is checked before anything uses it, so a bad input is one line naming the file,
the line or entry and the field (the CLI's exit status 2), never a KeyError or a string taken
apart into its characters.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping

from .errors import RawcodeError

MAX_DEPTH = 32  # a record line or a manifest nests 3 levels; json recurses once per level

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')  # a JSON string, escapes included
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


class SchemaError(RawcodeError, ValueError):
    """JSON that is not a record line or a manifest entry; the message names where and why."""


def depth(text: str) -> int:
    """How deeply the arrays and objects of JSON text nest (brackets inside strings ignored)."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    level = deepest = 0
    for c in brackets:
        level += 1 if c in "[{" else -1
        deepest = max(deepest, level)
    return deepest


def loads(text: str, where: str) -> object:
    """json.loads without its recursion: text nested deeper than MAX_DEPTH is a SchemaError."""
    if depth(text) > MAX_DEPTH:
        raise SchemaError(f"{where}: nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text)
    except ValueError as e:
        raise SchemaError(f"{where}: not JSON ({e})") from None


def type_name(value: object) -> str:
    """JSON-ish words for a value's type in messages: str, int, bool, list, object, null."""
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        inner = sorted({type_name(v) for v in value if not isinstance(v, str)})
        return f"list containing {', '.join(inner)}" if inner else "list"
    return type(value).__name__


def _got(what: str, value: object) -> str:
    """The value itself where a field takes given values (schema, kind), else its type's name."""
    if what in _VALUES and isinstance(value, (str, int, float)):
        return json.dumps(value)[:40]
    return type_name(value)


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


# what a field may hold: words for messages -> test
TYPES: dict[str, Callable[[object], bool]] = {
    "a string": lambda v: isinstance(v, str),
    "a string or null": lambda v: v is None or isinstance(v, str),
    "true or false": lambda v: isinstance(v, bool),
    "a list of strings": _strings,
    "a list of strings or null": lambda v: v is None or _strings(v),
    "1": lambda v: type(v) is int and v == 1,
    '"cupy" or "raw"': lambda v: v in ("cupy", "raw"),
    '"cupy" or null': lambda v: v is None or v == "cupy",
    "a file name (no directory)": lambda v: v is None or (isinstance(v, str) and "/" not in v),
    '"cubin", "ptx" or "ltoir"': lambda v: v in ("cubin", "ptx", "ltoir"),
}

_VALUES = ("1", '"cupy" or "raw"', '"cupy" or null', '"cubin", "ptx" or "ltoir"')

# field -> (what it must be, required)
Fields = Mapping[str, tuple[str, bool]]

RECORD_COMMON: Fields = {
    "schema": ("1", True),
    "kind": ('"cupy" or "raw"', True),
    "id": ("a string", False),
    "source": ("a string", True),
    "options": ("a list of strings", True),
    "name_expressions": ("a list of strings or null", False),
    "jitify": ("true or false", False),
}
RECORD_KINDS: dict[str, Fields] = {
    "cupy": {
        "cupy_options": ("true or false", False),
        "cooperative": ("true or false", True),
        "extra_source": ('"cupy" or null', False),
        "extra_source_text": ("a string", False),
    },
    "raw": {
        "source_dir": ("a string or null", False),
        "source_name": ("a file name (no directory)", False),
        "target": ('"cubin", "ptx" or "ltoir"', False),  # a compile() call's, when not cubin
    },
}
# every field optional (manifest_entry wants exactly one of file and code)
MANIFEST_ENTRY: Fields = {
    **dict.fromkeys(("file", "code", "name"), ("a string", False)),
    **dict.fromkeys(("options", "name_expressions", "arch"), ("a list of strings", False)),
}


def check(item: object, fields: Fields, where: str, *, closed: bool = False) -> dict:
    """``item`` as a dict whose fields hold what ``fields`` says (SchemaError naming the first
    that does not); ``closed``: a field not in ``fields`` is refused too."""
    if not isinstance(item, dict):
        raise SchemaError(f"{where}: expected a JSON object, got {type_name(item)}")
    for name, (what, required) in fields.items():
        if name not in item:
            if required:
                raise SchemaError(f"{where}: {name} is missing (it must be {what})")
            continue
        if not TYPES[what](item[name]):
            raise SchemaError(f"{where}: {name} must be {what}, got {_got(what, item[name])}")
    if closed:
        unknown = sorted(set(item) - set(fields))
        if unknown:
            raise SchemaError(f"{where}: unknown field(s) {unknown}")
    return item


def record_entry(item: object, where: str) -> dict:
    """A record line's entry, checked: the common fields, then those of its kind."""
    entry = check(item, RECORD_COMMON, where)
    return check(entry, RECORD_KINDS[entry["kind"]], where)


def manifest_entry(item: object, where: str) -> dict:
    """A prebuild manifest's entry, checked: exactly one of file and code, no unknown field."""
    entry = check(item, MANIFEST_ENTRY, where, closed=True)
    if ("file" in entry) == ("code" in entry):
        raise SchemaError(f"{where}: give exactly one of 'file' and 'code'")
    return entry
