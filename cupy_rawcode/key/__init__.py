"""Stage 3, the key: takes a normalized request and its header closure (request.py) and gives
the cache key; the warm index (below) maps a kernel's inputs as given straight to it, checked by
file stamps (ground/stamps.py); a source's header manifest (manifest.py) keys it again in a new
process without re-scanning. The key's fields and the warm index are here, in the package
itself, so that a warm hit loads no more modules than it needs.

The cache key: labelled, length-prefixed fields, schema version first, hashed with SHA-256.

It covers exactly what the compiler receives: source, normalized options (include directories as
tags, never paths), NVRTC version, arch, output kind, sorted name expressions and the closure's
(logical name, content digest) list. The closure enters as one field, the digest of that list
(closure_digest), so that a manifest can hold it and a warm key costs no per-header encoding.
The source's directory enters only through the closure: a header found there is named
``src:...``; when none is, a file and the same text as a string share a key. Paths enter only
where the compiled code holds them (headers/filename.py): the program name when the source can
expand ``__FILE__`` (``assert``), and every search directory's path under -lineinfo or -G.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterable

from ..ground import VERSION, StampedRecord, config, deferred, digest_fields
from ..store.layout import cache_location, owned

SCHEMA = "cupy-rawcode-key-6"  # 2: SHA-256 header digests; 3: closure as one digest; 4: entries
#                                 hold NVRTC's log, CuPy's default options, program name; 5: the
#                                 source directory through the closure only, the program name and
#                                 search paths where the code holds them; 6: every -arch folded,
#                                 a PTX source's assembler options applied
STRIP_RULES = "library-globals-1"  # strip.py's rules: change this when they change
LINK_RULES = "cudadevrt-1"  # devrt.link's: bump when what it does to the same input changes


def strip_field() -> tuple[str, str]:
    """The key field of strip.py's post-processing: its rules' version, or 'off'
    (CUPY_RAWCODE_STRIP=0). Whether it applies to a request follows from the other fields
    (options, target, input kind), so strip.py is not imported to key a hit."""
    return ("strip", STRIP_RULES if config.strip() else "off")


def program_name(source: str, source_dir: str | None, source_name: str | None) -> str:
    """The name NVRTC gives the source: the user's file when there is one, else a stable name
    derived from the source, in a directory that does not exist (so that a quoted include never
    searches the working directory, as in CuPy)."""
    if source_dir:
        return os.path.join(source_dir, source_name or "kernel.cu")
    digest = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()
    return f"<source>/kernel-{digest[:12]}.cu"


def key_fields(
    *,
    source: str,
    option_fields: list[tuple[str, str]],
    search_tags: list[str],
    nvrtc_version: str,
    arch: str,
    target: str,
    name_expressions: Iterable[str],
    closure: str,
    extra: Iterable[tuple[str, str]] = (),
) -> list:
    """All fields of a key, in a fixed order (pure; see module docstring)."""
    fields: list[tuple[str, str]] = [("schema", SCHEMA), ("source", source)]
    fields += option_fields
    fields += [("search", tag) for tag in search_tags]
    fields += [("nvrtc", nvrtc_version), ("arch", arch), ("target", target)]
    fields += [("name_expression", n) for n in sorted(set(name_expressions))]
    fields += list(extra)
    fields += [("closure", closure)]
    return fields


def closure_digest(closure: Iterable[tuple[str, str]]) -> str:
    """The digest of a sorted (logical name, content digest) list: the closure's key field."""
    fields: list[tuple[str, str]] = [("closure_schema", SCHEMA)]
    for logical, digest in closure:
        fields += [("header", logical), ("digest", digest)]
    return digest_fields(fields)


# ------------------------------------------------------------------ the warm index
# The warm index: a kernel's inputs as given -> the cache key they compiled under, so that a new
# process finds its entry without importing the key path (options, search, toolchain, manifest,
# request, program).
#
# An index entry is keyed by the raw inputs (source as compiled, options as given, the device's
# compute capability or an explicit arch, name expressions, source directory) and by everything
# else the key path reads: the environment variables of config.KEY_ENV, the Python environment
# (executable, prefix, site-packages directories), this package's version and key schema. It holds
# the key, the arch and target chosen, and the stamps (stamps.py) of every file the key depended
# on: the toolchain record's, each closure header's, and this package's modules that compute
# keys (all but ground/stamps.py's UNKEYED folders). A hit needs every stamp to hold; anything
# else (a missing, damaged or foreign entry, a changed file) is a miss, and the caller keys the
# full way (request.compute_key) and writes the entry again.
#
# Like a manifest's, the stamps hold every path the search found empty in the program's own
# directories, stamped absent: a new header there (shadowing one, answering a probe) misses.

_stamps = deferred("cupy_rawcode.ground.stamps")  # taking stamps: saving an entry only
_sizebound = deferred("cupy_rawcode.store.sizebound")  # publishing it: saving an entry only

INDEX_SCHEMA = "cupy-rawcode-index-11"  # 2: stamps digest the values only; 3: stamps hold the
#                                      ctime; 4: a standard floor NVRTC can reach (liveness.py);
#                                      5: the CCCL roots before -I (search.py: CuPy's order)
#                                      6: includes however spelled (%:include), and a floor read
#                                      soundly (liveness.py: what a fuzzer against NVRTC found)
#                                      7: the fuzzer's second pass (splices inside tokens, ...)
#                                      8: its third (computed includes, '..' past symlinks)
#                                      9: options naming a file NVRTC writes are never kept;
#                                      an #include_next reached twice; -include in the cwd
#                                      10: the working directory of a relative -I/-isystem
#                                      11: every -arch folded as NVRTC folds them


_PRE_INCLUDE = ("-include", "--pre-include")  # headers/options.py's spellings
_DIRECTORY = ("-I", "--include-path", "-isystem")  # and of a directory searched


def cwd_matters(options) -> bool:
    """Whether the working directory is part of what ``options`` mean: a pre-include (searched
    there first), or a directory named by a relative path (-I inc: another directory's inc/
    in another working directory). Read as text, without parsing the options."""
    for i, item in enumerate(options):
        o = item.strip() if isinstance(item, str) else ""
        if o.startswith(_PRE_INCLUDE):
            return True
        spelled = next((d for d in _DIRECTORY if o.startswith(d)), None)
        if spelled is not None:
            value = o[len(spelled) :].lstrip("=").strip()
            if not value and i + 1 < len(options) and isinstance(options[i + 1], str):
                value = options[i + 1].strip()
            if not os.path.isabs(value):
                return True
    return False


def index_id(
    source: str,
    options: tuple[str, ...],
    device: str,
    name_expressions: tuple[str, ...],
    source_dir: str | None,
) -> str:
    """The id of an index entry (pure but for the environment it reads: see module docstring).
    ``options`` exactly as compiled; ``device`` is 'cc90' or an explicit arch such as 'sm_90'."""
    fields = [
        ("schema", INDEX_SCHEMA),
        ("package", VERSION),
        ("key_schema", SCHEMA),
        strip_field(),
        ("device", device),
        ("source", source),
        ("source_dir", source_dir or ""),
    ]
    fields += [("option", o) for o in options]
    if cwd_matters(options):
        fields.append(("cwd", os.getcwd()))
    fields += [("name_expression", n) for n in name_expressions]
    fields += [("env", f"{k}={v}") for k, v in config.key_environment()]
    fields += [("python", sys.executable), ("prefix", sys.prefix)]
    fields += [("site", p) for p in config.site_dirs()]
    return digest_fields(fields)


def _valid_index(data: dict) -> bool:
    """Whether an entry read from disk has the fields a hit needs, of their types."""
    return all(isinstance(data[f], str) for f in ("key", "arch", "target")) and isinstance(
        data["count"], int
    )


_INDEX = StampedRecord("index", INDEX_SCHEMA, owned, _valid_index)
_index_memo = _INDEX.memo  # entry path -> its data, in this process (stamps still checked)


def index_lookup(iid: str) -> dict | None:
    """The entry recorded for these inputs while every stamp still holds, else None: its
    ``"key"`` and the ``"arch"``/``"target"`` chosen for it, with the closure's header
    ``"count"`` (types checked: ``_valid_index``)."""
    loaded = index_stamped(iid)
    return None if loaded is None else loaded[0]


def index_stamped(iid: str) -> tuple[dict, list] | None:
    """index_lookup's entry, with the flat stamps of its files as its check read them now."""
    return _INDEX.load(cache_location().path, iid)


def index_save(iid: str, key: str, arch: str, target: str, count: int, stamps: list | None) -> None:
    """Record what these inputs keyed to. ``stamps``: the parts taken when the key was computed
    (request.Keyed.stamps); None (the toolchain is not stamped) writes nothing. A read-only
    cache writes nothing either: other processes then key the full way."""
    if stamps is None:
        return
    fields = {
        "key": key,
        "arch": arch,
        "target": target,
        "count": count,
        "stamps": _stamps.merge(stamps + [_stamps.take(_stamps.package_stamps())]),
    }
    _INDEX.save(cache_location().path, iid, fields, _sizebound.publish)
