"""Portable closure records (key/portable.py): a closure kept as a store entry, trusted by
content where no manifest answers, so that a bundle or a remote level spares a new process the
header resolve."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import new_process

from cupy_rawcode.headers import fast
from cupy_rawcode.key import manifest, portable
from cupy_rawcode.key.request import compute_key, context, make_request
from cupy_rawcode.store import Levels, ReadOnly, default_store, set_store
from cupy_rawcode.store.base import _tallies
from cupy_rawcode.store.directory import DirectoryStore
from cupy_rawcode.store.entry import decode, encode

N = 20  # headers in the chain: over portable.MIN_HEADERS, so that the closure gets a record
SOURCE = '#include "local.h"\n#include <lib/h0.h>\nextern "C" __global__ void k() {}\n'


def _files() -> dict:
    """lib/h0.h .. lib/h{N-1}.h, each including the next; local.h (found in the source's own
    directory? no: in the -I directory, so the source's directory is searched and stamped
    absent first)."""
    files = {f"lib/h{i}.h": f'#include "h{i + 1}.h"\nint v{i};\n' for i in range(N - 1)}
    files[f"lib/h{N - 1}.h"] = f"int v{N - 1};\n"
    files["local.h"] = "int local;\n"
    # includes looked for and not found: a probe, and a quoted include in a branch
    files["lib/h3.h"] += "#if __has_include(<lib/extra.h>)\n#include <lib/extra.h>\n#endif\n"
    files["lib/h5.h"] += '#ifdef WANT_OPT\n#include "opt.h"\n#endif\n'
    return files


@pytest.fixture
def layout(tree, tmp_path):
    """A root with an empty -I directory (first), the headers' -I directory and the source's
    own directory: {"first", "inc", "src"} paths, under ``base`` (another base: a copy)."""

    def make(base):
        tree({".keep": ""}, base / "first")
        tree(_files(), base / "inc")
        tree({"k.cu": SOURCE}, base / "src")
        return {name: base / name for name in ("first", "inc", "src")}

    return make


def _request(paths):
    return make_request(
        SOURCE,
        arch="sm_90",
        options=("-I", str(paths["first"]), "-I", str(paths["inc"])),
        source_dir=str(paths["src"]),
        source_name="k.cu",
    )


def _key(paths) -> str:
    return compute_key(_request(paths)).key


@pytest.fixture
def resolves(monkeypatch):
    """How many times the fast resolver ran since the fixture was made."""
    calls = []
    real = fast.resolve_fast
    monkeypatch.setattr(fast, "resolve_fast", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


def _record_entries() -> dict:
    """The records in the cache directory: key -> their JSON data."""
    disk = default_store().level("disk")
    found = {}
    for info in disk.entries():
        code, meta = decode(info.key, disk.get(info.key))
        if meta.get("target") == portable.TARGET:
            found[info.key] = json.loads(code)
    return found


def test_a_record_round_trips_and_names_headers_by_tag(layout, tmp_path):
    paths = layout(tmp_path / "a")
    keyed = compute_key(_request(paths))
    records = _record_entries()
    assert list(records) == [keyed.record]
    data = records[keyed.record]
    assert data["schema"] == portable.SCHEMA and data["count"] == N + 2  # local.h, the shim's
    ctx = context(_request(paths))
    user1 = [d.tag for d in ctx.dirs].index("user1")  # after the CCCL roots (search.py)
    assert ["user1", user1, "lib/h0.h"] in [h[:3] for h in data["headers"]]
    assert all(str(tmp_path) not in json.dumps(h) for h in data["headers"])  # no paths
    assert data["absent"] == ["local.h"]  # looked for in src/ (the shims' pre-include: not)
    facts, ids = portable.validate(data, ctx)
    present, gone = [i for i in ids if i[1] is not None], [i[0] for i in ids if i[1] is None]
    assert facts["closure"] == data["closure"] and len(present) == N + 2
    # the source directory's files, and a shadow's place in an earlier -I directory: absent
    assert {os.path.basename(p) for p in gone} >= {"local.h"}
    assert any(p.startswith(ctx.dirs[[d.tag for d in ctx.dirs].index("user0")].path) for p in gone)


def test_a_valid_record_keys_without_resolving(layout, tmp_path, resolves):
    paths = layout(tmp_path / "a")
    key = _key(paths)
    assert len(resolves) == 1
    new_process()
    again = compute_key(_request(paths))
    assert again.key == key and again.closure is None and len(resolves) == 1
    # and it wrote the local manifest: the next look-up is a stat check
    assert manifest.lookup(SOURCE, context(_request(paths)), _request(paths).pre_includes)


def _change_header(paths):
    (paths["inc"] / "lib" / "h7.h").write_text('#include "h8.h"\nint changed;\n')


def _shadow(paths):
    (paths["first"] / "lib").mkdir()
    (paths["first"] / "lib" / "h0.h").write_text("#include <lib/h1.h>\nint shadow;\n")


def _present(paths):
    (paths["src"] / "local.h").write_text("int here;\n")


def _probe_found(paths):
    (paths["inc"] / "lib" / "extra.h").write_text("int extra;\n")


def _branch_found(paths):
    (paths["inc"] / "lib" / "opt.h").write_text("int opt;\n")  # beside h5.h, which looks there


def _remove(paths):
    (paths["inc"] / "lib" / "h19.h").unlink()
    (paths["inc"] / "lib" / "h18.h").write_text("int v18;\n")  # no longer includes it


def _damage(paths):
    disk = default_store().level("disk")
    [rid] = _record_entries()
    raw = bytearray(disk.path(rid).read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    disk.path(rid).write_bytes(bytes(raw))


def _foreign(shape):
    def put(paths):
        disk = default_store().level("disk")
        [rid] = _record_entries()
        disk.path(rid).write_bytes(encode(rid, json.dumps(shape).encode(), {"target": "x"}))

    return put


def _tamper(field, value):
    """A record whose own fields lie: its entry is whole, its facts are not its headers'."""

    def put(paths):
        disk = default_store().level("disk")
        [(rid, data)] = _record_entries().items()
        data[field] = value
        raw = encode(rid, json.dumps(data).encode(), {"target": portable.TARGET})
        disk.path(rid).write_bytes(raw)

    return put


# (what happens between the two keys, whether the key changes): each resolves again
STALE = [
    ("a header's content changed", _change_header, True),
    ("a header shadowed in an earlier -I directory", _shadow, True),
    ("a file looked for and absent is there now", _present, True),
    ("a header gone from the closure", _remove, True),
    ("a header a __has_include probe looked for is there now", _probe_found, True),
    ("a header an include in a branch looked for is there now", _branch_found, True),
    ("the record's entry damaged", _damage, False),
    ("another entry under the record's key", _foreign({"schema": portable.SCHEMA}), False),
    ("a record of another schema", _tamper("schema", "cupy-rawcode-closure-0"), False),
    ("a record whose digest is not its headers'", _tamper("closure", "0" * 64), False),
    ("a record whose count is not its headers'", _tamper("count", 3), False),
    (
        "a record whose headers are not a list of triples",
        _tamper("headers", [["x", 0, "a.h"]]),
        False,
    ),
    ("a record whose floor is no floor", _tamper("floor", "c++17"), False),
    ("a header in a directory not searched here", _tamper("headers", [["user1", 9, "a", ""]]), 0),
]


@pytest.mark.parametrize("change, differs", [s[1:] for s in STALE], ids=[s[0] for s in STALE])
def test_a_record_that_does_not_hold_is_a_miss_and_the_closure_is_resolved(
    change, differs, layout, tmp_path, resolves
):
    paths = layout(tmp_path / "a")
    before = _key(paths)
    change(paths)
    new_process()
    after = _key(paths)
    assert len(resolves) == 2  # resolved again, never an exception
    new_process()
    resolves.clear()
    assert _key(paths) == after and (after != before) == differs  # the fresh key's
    assert resolves == []  # the record put after the fresh resolve holds


def test_a_record_made_under_one_root_serves_another(layout, tmp_path, resolves):
    a, b = layout(tmp_path / "a"), layout(tmp_path / "b")
    key = _key(a)
    assert _key(b) == key and len(resolves) == 1  # b's paths: no manifest, the record
    assert len(_record_entries()) == 1


# a '..' read past a symbolic link: where it leads is the tree's own, whatever the contents say
# name -> (the include of the main source, and of d/a.h)
DOTDOT = {
    "a quoted '..' from a header in a linked directory": ("#include <all.h>\n", '"../c.h"'),
    "an angled name's '..' after a linked directory": (
        "#include <all.h>\n#include <d/../c.h>\n",
        "<f0.h>",
    ),
}


def _dotdot_tree(base, source, include, linked):
    """More than MIN_HEADERS headers in inc/, and d/a.h, which includes ``include``: in a real
    inc/d, or (``linked``) in other/d2, which inc/d links to, beside another c.h."""
    files = {f"inc/f{i}.h": f"int f{i};\n" for i in range(N)}
    files["inc/all.h"] = "".join(f"#include <f{i}.h>\n" for i in range(N)) + "#include <d/a.h>\n"
    files["inc/c.h"] = "int c;\n"
    d = "other/d2" if linked else "inc/d"
    files[f"{d}/a.h"] = f"#include {include}\n"
    if linked:
        files["other/c.h"] = "int other;\n"
    for rel, text in files.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(text)
    if linked:
        os.symlink(base / "other" / "d2", base / "inc" / "d")
    return make_request(source, arch="sm_90", options=(f"-I{base / 'inc'}",))


@pytest.mark.parametrize("name", sorted(DOTDOT))
def test_a_record_never_serves_a_tree_where_a_dotdot_leads_elsewhere(name, tmp_path, resolves):
    source, include = DOTDOT[name]
    real = _dotdot_tree(tmp_path / "x", source, include, False)
    linked = _dotdot_tree(tmp_path / "y", source, include, True)
    compute_key(real)
    assert len(_record_entries()) == 1
    new_process()
    keyed = compute_key(linked)
    assert keyed.closure is not None and len(resolves) == 2  # resolved: the record did not hold
    assert any(h.path == str(tmp_path / "y" / "other" / "c.h") for h in keyed.closure.headers)
    assert keyed.key == compute_key(linked, fresh=True).key


def test_record_look_ups_and_puts_are_not_counted(layout, tmp_path, resolves):
    paths = layout(tmp_path / "a")
    tallies = {name: dict(t) for name, t in _tallies.items()}
    _key(paths)  # a miss, then a put
    new_process()
    _key(paths)  # a hit
    assert len(resolves) == 1  # the record answered
    assert [r for r in default_store().stats()["levels"] if any(r[f] for f in _FIELDS)] == []
    assert {name: dict(t) for name, t in _tallies.items() if any(t.values())} == {
        name: t for name, t in tallies.items() if any(t.values())
    }


_FIELDS = ("hits", "misses", "errors", "writes", "bytes_read", "bytes_written")


def test_records_stay_out_of_the_memory_level(layout, tmp_path, resolves):
    """A process reads a record once (a manifest answers after it): written and read, it never
    takes a place in the in-process LRU that kernels' entries need."""
    paths = layout(tmp_path / "a")
    keyed = compute_key(_request(paths))  # resolved, the record saved
    memory = default_store().level("memory")
    assert keyed.record and keyed.record in _record_entries() and memory.get(keyed.record) is None
    new_process()
    assert compute_key(_request(paths)).key == keyed.key and len(resolves) == 1  # read back
    assert memory.get(keyed.record) is None


def test_a_read_only_store_keys_and_serves_records(layout, tmp_path, resolves):
    paths = layout(tmp_path / "a")
    key = _key(paths)  # the record, in the cache directory
    new_process()
    cache = os.environ["CUPY_RAWCODE_CACHE_DIR"]
    set_store(Levels([ReadOnly(DirectoryStore(cache))]))
    try:
        assert _key(paths) == key and len(resolves) == 1  # served by the record
        _change_header(paths)
        new_process()
        assert _key(paths) != key and len(resolves) == 2  # resolved: nothing to write
    finally:
        set_store(None)


def test_an_unwritable_cache_directory_still_keys(layout, tmp_path, monkeypatch, resolves):
    paths = layout(tmp_path / "a")
    blocker = tmp_path / "file"
    blocker.write_text("no directory")
    monkeypatch.setenv("CUPY_RAWCODE_CACHE_DIR", str(blocker / "c"))
    assert _key(paths) == _key(paths) and len(resolves) >= 1


_SERVED = r"""
import json, sys
from cupy_rawcode.headers import fast
from cupy_rawcode.key.request import compute_key, make_request

def refuse(*args, **kw):
    raise AssertionError("resolve_fast called")

fast.resolve_fast = refuse
paths = json.loads(sys.argv[1])
req = make_request(
    open(sys.argv[2]).read(),
    arch="sm_90",
    options=("-I", paths["first"], "-I", paths["inc"]),
    source_dir=paths["src"],
    source_name="k.cu",
)
print(compute_key(req).key)
"""


def test_a_bundle_serves_a_new_process_with_an_empty_cache(layout, tmp_path):
    """One process keys (and puts the record) and exports a bundle; a new process, another
    root and an empty cache directory, keys from the bundle's record without resolving."""
    a, b = layout(tmp_path / "a"), layout(tmp_path / "b")
    key = _key(a)
    bundle = tmp_path / "app.bundle"
    env = {**os.environ, "CUPY_RAWCODE_CACHE_DIR": os.environ["CUPY_RAWCODE_CACHE_DIR"]}
    subprocess.run(
        [sys.executable, "-m", "cupy_rawcode.cli", "bundle", "export", str(bundle)],
        env=env,
        check=True,
        capture_output=True,
    )
    env = {
        **os.environ,
        "CUPY_RAWCODE_CACHE_DIR": str(tmp_path / "empty"),
        "CUPY_RAWCODE_BUNDLES": str(bundle),
    }
    served = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(_SERVED),
            json.dumps({k: str(v) for k, v in b.items()}),
            str(b["src"] / "k.cu"),
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert served.returncode == 0, served.stderr
    assert served.stdout.split() == [key]
    assert list((tmp_path / "empty" / "manifests").rglob("*.json"))  # stat from now on
