"""The modules imported on first use instead of with the module that names them, each with the
reason, in one list (DEFERRED); ``deferred(name)`` gives a stand-in that imports the module the
first time one of its attributes is read (``deferred`` lives in ground/__init__.py, which every
module loads anyway: this list is read by the tests only, never imported on a hit).

A warm cache hit must not pay for what only a miss, a failure or an optional feature needs
(CuPy takes 0.2-0.5 s to import, cuda.core 50-100 ms, each of the package's modules 0.1-0.5 ms
on the device host). A module names such a dependency once, at module level::

    nvrtc = deferred("cupy_rawcode.compiler.nvrtc")  # a miss only
    ...
    nvrtc.compile_program(...)  # imported here, the first time

An ``import`` inside a function is kept for what is needed at once (a CuPy base class); it too
must name a module of this list. tests/layers/test_layers.py enforces both: an import inside a
function of a module not listed fails, and a deferred name counts as an import for the layer
order.
"""

from __future__ import annotations

# name (a module, or a package: its submodules too) -> why it is not imported at module level
DEFERRED: dict[str, str] = {
    # other projects: heavy, or optional
    "cupy": "0.2-0.5 s to import; a compile or a hit's keying needs none of it",
    "cupyx": "CuPy's extras, as cupy",
    "cupy_backends": "CuPy's driver bindings, as cupy",
    "numpy": "imported by CuPy; never needed before it",
    "cuda.bindings": "NVRTC and nvJitLink: a miss, a version query or a link only",
    "cuda.core": "50-100 ms to import; a PTX link, or a result's ObjectCode, only",
    "cuda.pathfinder": "finding NVIDIA's libraries: discovery only",
    "pcpp": "the C preprocessor of exact header mode only",
    "redis": "optional (extra `redis`): a Redis store only",
    "pymemcache": "optional: a memcached store only",
    "boto3": "optional (extra `s3`): an S3 store only",
    "botocore": "boto3's own, as boto3",
    "zstandard": "optional (extra `zstd`): the first compressed entry read or written only; "
    "0.5-2 ms to import (store/zstd.py loads its C backend alone where it can)",
    # the standard library: not loaded by a warm hit, used off it
    "logging": "2-5 ms to import; only a message that is logged needs it (ground/log.py)",
    "difflib": "a misspelt variable's closest name only",
    "tempfile": "a scratch directory of a miss or a pool only",
    "shutil": "removing a scratch directory only",
    "ctypes": "the early NVRTC load of a miss only",
    "queue": "the worker pool only",
    "resource": "the worker pool's memory bound only",
    "dataclasses": "the prebuild plan only",
    "textwrap": "the CLI's help only",
    "traceback": "the CLI's crash report only",
    "signal": "the CLI's and the workers' signal handlers only",
    "struct": "reading an ELF file (strip, relocatable links) only",
    "importlib": "the package's lazy exports, and finding optional packages",
    "json": "reading a stamped record: a warm hit's (CuPy has loaded it), not the package's import",
    "array": "digesting a record's stamps: as json",
    "hashlib": "2-3 ms to import (OpenSSL): the first digest (CuPy, on a hit, has loaded it)",
    "fcntl": "POSIX only: file locks where the platform has them",
    "atexit": "a clean-up registered the first time it is needed",
    "urllib.request": "~10 ms to import (http.client, email): an HTTP store only",
    "urllib.error": "an HTTP store only, with urllib.request",
    "urllib.parse": "a file: or bundle: URL with an authority (file://host/path) only",
    "xml": "an HTTP (WebDAV) store's listing only",
    "concurrent.futures": "the bulk requests of an HTTP or S3 store only (it imports logging)",
    # the package's own modules a warm hit must not load
    "cupy_rawcode.compiler": "compiling: a miss only (NVRTC, strip, link, hints, early load)",
    "cupy_rawcode.headers": "resolving headers: the first key of a source, or a miss",
    "cupy_rawcode.toolkit": "finding the toolkit and its record: the first key, or a miss",
    "cupy_rawcode.orchestrator": "running a compile: a miss only (the warm index answers a hit)",
    "cupy_rawcode.launch": "reading a kernel's C++ signature: its first call with arguments",
    "cupy_rawcode.key.request": "keying the full way: the first key of a source",
    "cupy_rawcode.key.manifest": "a source's header manifest: the first key in a process",
    "cupy_rawcode.key.cupy": "the key of CuPy's own compile: a served or compiled call only, "
    "not reading one (every wrapped CuPy compile reads its call)",
    "cupy_rawcode.store.sizebound": "writing to the cache (publish, the size bound): a miss only",
    "cupy_rawcode.store.zstd": "the zstd codec: an entry of 256 KiB or more only",
    "cupy_rawcode.store.eviction": "pruning and clearing the cache only",
    "cupy_rawcode.store.usage": "scanning the cache: pruning, stats only",
    "cupy_rawcode.store.counters": "hit and miss counters: stats only",
    "cupy_rawcode.store.urls": "stores opened by URL: a default stack builds its memory and "
    "directory levels itself",
    "cupy_rawcode.store.readonly": "a read-only wrapper: a `|read-only` remote spec only",
    "cupy_rawcode.store.directory": "the cache directory: make_store builds it (store/__init__)",
    "cupy_rawcode.cli.dispatch": "the command's modules (~0.1 s): loaded inside the command's "
    "Ctrl-C guard, so an interrupt while they load exits 130 without a traceback",
    "cupy_rawcode.store.bundle": "bundle files: when configured only",
    "cupy_rawcode.store.redis": "a Redis store: when configured only",
    "cupy_rawcode.store.remote": "remote levels: when CUPY_RAWCODE_REMOTE or a URL names one",
    "cupy_rawcode.store.memcached": "a memcached store: when configured only",
    "cupy_rawcode.store.http": "an HTTP store: when configured only",
    "cupy_rawcode.store.s3": "an S3 store: when configured only",
    "cupy_rawcode.ground.errors": "the exception classes below the two roots (which the ground "
    "package builds): raised, caught, imported or unpickled only; a module that only raises "
    "them names them when it raises",
    "cupy_rawcode.ground.log": "logging (see above): a message only",
    "cupy_rawcode.ground.stamps": "taking file stamps: a miss's key and the warm index's save "
    "only (a hit checks stamps through the ground package)",
    "cupy_rawcode.ground.sources": "a header search policy checked: when one is given, or on a "
    "miss's discovery",
    "cupy_rawcode.ground.regular": "reading a source or a record, opening a cache file to write: "
    "a warm hit reads through the ground package's readers only",
    "cupy_rawcode.ground.fsutil": "writing files (atomic writes, private dirs): a miss only",
    "cupy_rawcode.ground.nvrtclog": "reading NVRTC's log: a failed compile only",
    "cupy_rawcode.ground.redaction": "hiding a URL's secrets: a message quoting one only",
    "cupy_rawcode.ground.inputs": "checking a raw input: a new source or name only",
    "cupy_rawcode.ground.confine": "confining recorded paths: recording only",
    "cupy_rawcode.ground.schema": "reading and writing recorded compiles only",
    "cupy_rawcode.kernel.pickling": "what a pickle carries: pickling only",
    "cupy_rawcode.kernel.cucomplex": "translate_cucomplex=True only",
    "cupy_rawcode.kernel.explicit": "a drop-in's compile() or typed launch() only",
    "cupy_rawcode.kernel.loading": "loading a module: the CuPy hook's (as kernel.building)",
    "cupy_rawcode.kernel.building": "building and loading kernels: the CuPy hook (loaded when "
    "CuPy is, by the interpreter-start hook of autoinstall.py) needs it for a jitify=True "
    "compile, or to load a module, only",
    "cupy_rawcode.hook.install": "the CuPy hook: autoinstall.py's, once CuPy is imported",
    "cupy_rawcode.hook.compiles": "CuPy's compiles: install() only",
    "cupy_rawcode.hook.recording": "recording CuPy's compiles: install() and record only",
    "cupy_rawcode.parallel": "the worker pool: warmup() and prebuild only",
}
