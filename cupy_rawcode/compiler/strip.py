"""Strip the device globals NVRTC emits for library constants that no code references.

NVRTC gives every constexpr static data member of CCCL and the std library that a kernel touches a
module-scope device global, even when each use was folded into a constant: 830 of them for
block_reduce.cu with NVRTC 13.0, where nvcc keeps 31. The driver spends about 4 µs on each when it
loads the module (bench/module_load.py), most of a warm start for a CUB kernel.

On a miss, ``strip`` removes from NVRTC's PTX each declaration that is
- module-internal (``.global`` with no ``.visible``, ``.extern`` or ``.weak``),
- in a library namespace (cuda, cub, thrust, std, nv, __cccl_internal), and
- named nowhere else in the PTX (code, initializers, comments).

For a cubin, NVRTC stops at PTX and ``assemble`` turns the stripped PTX into the cubin with
nvJitLink of NVRTC's own CUDA release, so the key's NVRTC version stays exact. Skipping NVRTC's
own ptxas run on the unstripped PTX pays for nvJitLink's (nvrtc.compile_program). User variables
are never touched, and any option that changes what ptxas does (``-G``, ``-lineinfo``,
``-maxrregcount``, ``-Xptxas``, ...) keeps NVRTC's own cubin. CUPY_RAWCODE_STRIP=0 turns this
off; the rules' version is a key field (key.strip_field).

``entry_functions`` lists a cubin's or PTX's kernels from the same ELF reading (RawKernel.compile
checks its name against them).
"""

import re
import threading

from ..ground import config
from ..ground.cudaimport import cuda_module
from ..ground.errors import RawcodeError
from ..ground.log import warn_once
from .signals import guarded

LIBRARY_NAMESPACES = frozenset({"cuda", "cub", "thrust", "std", "nv", "__cccl_internal"})

# Passthrough options that leave ptxas's work alone (they act in the front end or NVVM, or are
# recorded in the PTX itself). Anything else keeps NVRTC's cubin: slower to load, never wrong.
_NEUTRAL = (
    "-ftz=",
    "--ftz=",
    "-prec-div=",
    "--prec-div=",
    "-prec-sqrt=",
    "--prec-sqrt=",
    "-fmad=",
    "--fmad=",
    "-diag-",
    "--diag-",
)
_NEUTRAL_FLAGS = frozenset(
    {
        "-use_fast_math",
        "--use_fast_math",
        "-restrict",
        "--restrict",
        "-w",
        "--disable-warnings",
        "-extra-device-vectorization",
        "--extra-device-vectorization",
        "-expt-relaxed-constexpr",
        "--expt-relaxed-constexpr",
        "-expt-extended-lambda",
        "--expt-extended-lambda",
        "-extended-lambda",
        "--extended-lambda",
        "-default-device",
        "--device-as-default-execution-space",
        "-dw",
        "--display-error-number",
        "-no-display-error-number",
        "--no-display-error-number",
        "-err-no",
        "-no-err-no",
        "-builtin-move-forward=true",
        "-builtin-initializer-list=true",
        "-fno-exceptions",
    }
)


def wanted(passthrough: tuple[str, ...], target: str, is_ptx: bool) -> bool:
    """Whether a compile's output is stripped: C++ to cubin or PTX, stripping on, and only options
    known not to change what ptxas does."""
    if is_ptx or target not in ("cubin", "ptx") or not config.strip():
        return False
    return all(o in _NEUTRAL_FLAGS or o.startswith(_NEUTRAL) for o in passthrough)


def in_library(name: str) -> bool:
    """Whether a mangled name is an entity of a library namespace, looking through the
    ``_INTERNAL_<hash>_<file>`` wrapper NVRTC puts around internal-linkage names."""
    if name.startswith("_ZNSt"):
        return True
    if not name.startswith("_ZN"):
        return False
    i = 3
    while True:
        j = i
        while j < len(name) and name[j].isdigit():
            j += 1
        if j == i:
            return False
        ident = name[j : j + int(name[i:j])]
        if not ident.startswith("_INTERNAL_"):
            return ident in LIBRARY_NAMESPACES
        i = j + len(ident)


_patterns = None


def _regexes():
    global _patterns
    if _patterns is None:
        _patterns = (
            re.compile(r"\.global\s[^;=]*?\s([A-Za-z_$][\w$]*)(?:\[\d*\])?\s*(=[^;]*)?;\s*$"),
            re.compile(r"[A-Za-z_$%][\w$]*"),
        )
    return _patterns


def strip(ptx: str, keep: frozenset = frozenset()) -> tuple[str, int]:
    """(PTX without the unreferenced library globals, how many were removed). ``keep``: names
    that stay whatever they are (the lowered names of name expressions)."""
    decl, token = _regexes()
    lines = ptx.split("\n")
    declared: dict[int, str] = {}
    used: set[str] = set()
    for i, line in enumerate(lines):
        m = decl.match(line) if line.startswith(".global") else None
        if m is None:
            used.update(token.findall(line))
            continue
        declared[i] = m.group(1)
        if m.group(2):  # an initializer may name another global
            used.update(token.findall(m.group(2)))
    drop = {
        i
        for i, name in declared.items()
        if name not in used and name not in keep and in_library(name)
    }
    if not drop:
        return ptx, 0
    return "\n".join(line for i, line in enumerate(lines) if i not in drop), len(drop)


class _NvJitLink:
    """cuda.bindings.nvjitlink, loaded at most once per process (importing it and loading the
    library took 150 ms on a cold device host, so a compile starts it early on another thread)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.loaded = False
        self.module = None
        self.version: tuple[int, int] | None = None
        self.failed = False

    def get(self):
        with self.lock:
            if not self.loaded:
                self.loaded = True
                try:
                    nvjitlink = cuda_module("cuda.bindings.nvjitlink")

                    v = tuple(int(x) for x in nvjitlink.version())
                    self.version = (v[0], v[1])
                    self.module = nvjitlink
                except Exception:
                    self.module = None
            return self.module

    def release(self) -> str:
        """The loaded nvJitLink's "major.minor", for messages."""
        return "%d.%d" % self.version if self.version else "unknown"

    def usable(self, nvrtc_version: tuple[int, int]):
        """True or False once loaded in this process (of NVRTC's release or not), else None."""
        if not self.loaded or self.lock.locked():
            return None
        return self.module is not None and self.version == tuple(nvrtc_version) and not self.failed

    def prefetch(self) -> None:
        if not self.loaded:
            threading.Thread(target=self.get, name="cupy-rawcode-nvjitlink").start()


nvjitlink = _NvJitLink()


def assemble(ptx: bytes, arch: str, nvrtc_version: tuple[int, int]) -> bytes | None:
    """The cubin of ``ptx`` for ``arch`` from nvJitLink, or None (with one log line per process)
    when nvJitLink is missing or of another CUDA release than NVRTC, or fails."""
    mod = nvjitlink.get()
    if mod is None or nvjitlink.version != tuple(nvrtc_version):
        _warn_once(
            f"nvJitLink {'is not available' if mod is None else 'is ' + nvjitlink.release()}"
            f" (NVRTC is {nvrtc_version[0]}.{nvrtc_version[1]})"
        )
        return None
    try:
        return guarded(_link, mod, ptx, arch)
    except ProgramRefused:
        return None  # the program's own error: NVRTC's cubin compile, next, reports it as such
    except Exception as e:
        nvjitlink.failed = True
        _warn_once(f"nvJitLink failed ({e})")
        return None


class ProgramRefused(RawcodeError):
    """nvJitLink's assembler refused the program itself (too much shared data, too many
    registers asked, ...): its log names an error of the code, not of nvJitLink."""


# ptxas's lines in nvJitLink's error log: "error   : Entry function 'k' uses too much shared data"
_PROGRAM_ERROR = re.compile(r"^error\s*:", re.MULTILINE)


def _link(mod, ptx: bytes, arch: str) -> bytes:
    """nvJitLink's cubin of ``ptx``, creation to destruction on the calling thread
    (signals.guarded runs it: nvJitLink's handle must not change threads)."""
    handle = mod.create(1, [f"-arch={arch}"])
    try:
        mod.add_data(handle, mod.InputType.PTX, ptx, len(ptx), "kernel.ptx")
        try:
            mod.complete(handle)
        except Exception:
            if _PROGRAM_ERROR.search(error_log(mod, handle)):
                raise ProgramRefused from None
            raise
        out = bytearray(mod.get_linked_cubin_size(handle))
        mod.get_linked_cubin(handle, out)
        return bytes(out)
    finally:
        mod.destroy(handle)


def error_log(mod, handle) -> str:
    """nvJitLink's error log for ``handle`` ('' when it cannot be read): the stripping link's
    and devrt.py's."""
    try:
        log = bytearray(mod.get_error_log_size(handle))
        mod.get_error_log(handle, log)
    except Exception:
        return ""
    return bytes(log).rstrip(bytes(1)).decode(errors="replace").strip()


def _warn_once(why: str) -> None:
    """One log line per process when nvJitLink cannot strip: why, and what it costs."""
    warn_once(
        ("nvjitlink",),
        "cupy-rawcode: %s; cubins keep NVRTC's unreferenced library globals (a slower "
        "module load, nothing else)",
        why,
    )


def _elf(cubin: bytes) -> tuple[list[tuple], list[tuple[int, str, int]]]:
    """A cubin's section headers (ELF64 tuples) and its symbols as (st_info, name, st_other), in
    order."""
    import struct

    (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", cubin, 0x3A)
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)
    ]
    symbols: list[tuple[int, str, int]] = []
    for sh_type, link, off, size, entsize in ((s[1], s[6], s[4], s[5], s[9]) for s in sections):
        if sh_type != 2 or not entsize:  # SHT_SYMTAB
            continue
        strtab = sections[link][4]
        for j in range(size // entsize):
            st_name, st_info, st_other = struct.unpack_from("<IBB", cubin, off + j * entsize)
            end = cubin.index(b"\0", strtab + st_name)
            symbols.append((st_info, cubin[strtab + st_name : end].decode("latin-1"), st_other))
    return sections, symbols


def data_symbols(cubin: bytes) -> list[str]:
    """The names of a cubin's data objects (STT_OBJECT symbols of its ELF symbol table): the
    device globals the driver places when it loads the module."""
    return [name for info, name, _ in _elf(cubin)[1] if info & 0xF == 1]


_STO_CUDA_ENTRY = 0x10  # st_other of a kernel (a __global__ function) in a cubin
_PTX_ENTRY = r"^[ \t]*(?:\.(?:visible|weak|extern)[ \t]+)*\.entry[ \t]+([A-Za-z_$%][\w$]*)"


def entry_functions(code: bytes, kind: str) -> list[str]:
    """The kernels (entry functions) of a cubin (STT_FUNC symbols marked as entries) or of PTX
    (``.entry`` directives), by their symbol names, in order."""
    if kind == "cubin":
        symbols = _elf(code)[1]
        return [n for info, n, other in symbols if info & 0xF == 2 and other & _STO_CUDA_ENTRY]
    return re.findall(_PTX_ENTRY, code.decode("latin-1"), re.M)


_RESOURCE_ATTRS = {0x2F: 0, 0x11: 1, 0x12: 2}  # EIATTR_REGCOUNT, FRAME_SIZE, MAX_STACK_SIZE


def function_resources(cubin: bytes) -> dict[str, tuple[int, int, int]]:
    """(registers, stack frame bytes, max stack bytes) of each function, from the cubin's
    ``.nv.info`` records (what cuFuncGetAttribute reports as num_regs and local_size_bytes)."""
    import struct

    sections, symbols = _elf(cubin)
    shstr = sections[struct.unpack_from("<H", cubin, 0x3E)[0]][4]
    out: dict[str, list[int]] = {}
    for sec in sections:
        end = cubin.index(b"\0", shstr + sec[0])
        if cubin[shstr + sec[0] : end] != b".nv.info":
            continue
        data, i = cubin[sec[4] : sec[4] + sec[5]], 0
        while i + 4 <= len(data):
            fmt, attr = data[i], data[i + 1]
            if fmt != 4:  # EIFMT_SVAL: a size and a value; the others are four bytes in all
                i += 4
                continue
            (size,) = struct.unpack_from("<H", data, i + 2)
            if attr in _RESOURCE_ATTRS and size >= 8:
                sym, value = struct.unpack_from("<II", data, i + 4)
                name = symbols[sym][1] if sym < len(symbols) else f"#{sym}"
                out.setdefault(name, [0, 0, 0])[_RESOURCE_ATTRS[attr]] = value
            i += 4 + size
    return {k: (v[0], v[1], v[2]) for k, v in out.items()}


def worth_assembling(ptx: bytes, removed: int) -> bool:
    """Whether nvJitLink should assemble this stripped PTX: not when nothing was stripped (no
    faster load to gain) and the PTX keeps an array in local memory, which nvJitLink's
    relocatable ptxas may leave on a stack (uses_stack: NVRTC would then compile it again)."""
    return removed > 0 or b"__local_depot" not in ptx


def uses_stack(cubin: bytes) -> bool:
    """Whether any function of the cubin has a stack frame (local memory)."""
    return any(frame or stack for _, frame, stack in function_resources(cubin).values())


def no_worse(candidate: bytes, reference: bytes) -> bool:
    """Whether every function of ``candidate`` uses no more registers, stack frame or stack than
    in ``reference``. nvJitLink assembles PTX as relocatable code (ptxas -c), which can keep a
    local array in memory that NVRTC's whole-program ptxas puts in registers."""
    mine, theirs = function_resources(candidate), function_resources(reference)
    return set(mine) == set(theirs) and all(
        all(a <= b for a, b in zip(mine[f], theirs[f], strict=False)) for f in theirs
    )
