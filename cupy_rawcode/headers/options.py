"""Parse the option tuples CuPy users pass into one normalized form for both compile and key."""

import os
import re
import stat
from collections.abc import Iterable
from typing import NamedTuple

from ..ground import config, kind_of
from ..ground.confine import WHITESPACE
from ..ground.errors import BadInputError, RawcodeError, RawcodeValueError
from ..ground.inputs import check_option
from .paths import has_dotdot, physical

STD_VALUES = ("c++03", "c++11", "c++14", "c++17", "c++20")
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*\Z"  # compiled on first use (re caches it)
# a function-like macro's parameter list after its '(', as NVRTC takes it: names, '...' last
_PARAMS = r"[ \t]*(?:(?:[A-Za-z_]\w*[ \t]*,[ \t]*)*(?:[A-Za-z_]\w*(?:\.\.\.)?|\.\.\.)[ \t]*)?\)\Z"

# option spellings -> canonical name; each takes a value (joined, "=", or the next item)
_VALUED = {
    "-I": "include",
    "--include-path": "include",
    "-isystem": "isystem",
    "-D": "define",
    "--define-macro": "define",
    "-U": "undef",
    "--undefine-macro": "undef",
    "-std": "std",
    "--std": "std",
    "-arch": "arch",
    "--gpu-architecture": "arch",
    "-include": "pre_include",
    "--pre-include": "pre_include",
}
_JOINABLE = ("-isystem", "-I", "-D", "-U")  # may be glued: -Idir, -DX=1 (longest first)
# NVRTC's own options that it lets take their value as the next item, as ('-dopt', 'on'): each
# is handed on as one '=' item (-dopt=on), which NVRTC reads the same, so both spellings share a
# key and -rdc's value is seen. Measured against NVRTC 12.9 and 13.0, which take the next item
# whatever it is (('-rdc', '-dlto') is -rdc=-dlto to them, and refused); those taking a file or
# a standard (-time, -pch-dir, -create-pch, -use-pch, -fdevice-time-trace, -opt-info, -std) are
# refused spelled apart (tests/headers/test_options.py pins both sides against NVRTC itself).
NEXT_VALUE = frozenset(
    (
        *("-rdc", "--relocatable-device-code", "-dopt", "--dopt", "-Ofc", "--Ofast-compile"),
        *("-maxrregcount", "--maxrregcount", "-ftz", "--ftz", "-fmad", "--fmad"),
        *("-prec-sqrt", "--prec-sqrt", "-prec-div", "--prec-div", "-jtd", "--jump-table-density"),
        *("-modify-stack-limit", "--modify-stack-limit"),
        *("-device-stack-protector", "--device-stack-protector"),
        *("-builtin-move-forward", "--builtin-move-forward"),
        *("-builtin-initializer-list", "--builtin-initializer-list"),
        *("-diag-error", "--diag-error", "-diag-suppress", "--diag-suppress"),
        *("-diag-warn", "--diag-warn", "-brief-diag", "--brief-diagnostics"),
        *("-split-compile", "--split-compile", "-pch-verbose", "--pch-verbose"),
        *("-pch-messages", "--pch-messages"),
        *("-instantiate-templates-in-pch", "--instantiate-templates-in-pch"),
        *("-Xptxas", "--ptxas-options"),
    )
)
_FLAGS = {
    "-default-device": "default_device",
    "--device-as-default-execution-space": "default_device",
}
NO_SOURCE_INCLUDE = ("-no-source-include", "--no-source-include")  # kept in passthrough
# Options of Jitify itself, never NVRTC's: Jitify took them out before compiling (they steer its
# own header handling, which the resolver replaces; unused globals are stripped anyway:
# compiler/strip.py). Accepted and dropped, so Jitify-era option lists compile unchanged.
JITIFY_ONLY = frozenset(
    f"{dashes}{name}"
    for dashes in ("-", "--")
    for name in (
        "remove-unused-globals",
        "no-replace-pragma-once",
        "no-preinclude-workarounds",
        "no-system-headers-workaround",
        "no-builtin-headers",
    )
)


# NVRTC trims WHITESPACE from both ends of every option: " -D N=1" (ArrayFire's) is -DN=1


class NotAnOptionError(RawcodeError, ValueError):
    """An item of the options that is no option (it does not start with '-'): ``item``."""

    def __init__(self, item: str):
        super().__init__(
            f"option {item!r} does not start with '-' (options are a tuple of strings "
            "like ('-DN=4', '-I/path'))"
        )
        self.item = item


class Options(NamedTuple):
    """Normalized compile options. Paths are absolute; macros keep only their final state.
    Fields: ``include_dirs``, ``isystem_dirs`` (tuples of str), ``macros`` ((head, value)
    pairs, value None for -U; the head is the name, with its parameter list for a function-like
    macro: ``macro_name`` gives the name), ``std``, ``arch`` (or None), ``pre_includes``,
    ``default_device`` (bool), ``passthrough`` (options handed to NVRTC as they are),
    ``linked_dirs`` (the -I/-isystem directories spelled with a ``..``, as spelled: which
    directory they name follows symbolic links, so keying stamps them; never in the key)."""

    include_dirs: tuple[str, ...] = ()
    isystem_dirs: tuple[str, ...] = ()
    macros: tuple[tuple[str, str | None], ...] = ()
    std: str = "c++17"
    arch: str | None = None
    pre_includes: tuple[str, ...] = ()
    default_device: bool = False
    passthrough: tuple[str, ...] = ()
    linked_dirs: tuple[str, ...] = ()

    @property
    def no_source_include(self) -> bool:
        """NVRTC's ``-no-source-include``: a quoted include skips its includer's directory (the
        source's and a header's; a -include is still looked for in the working directory)."""
        return any(o in NO_SOURCE_INCLUDE for o in self.passthrough)

    @property
    def defines(self) -> list[str]:
        return [f"{n}={v}" for n, v in self.macros if v is not None]

    @property
    def undefines(self) -> list[str]:
        return [n for n, v in self.macros if v is None]

    def key_fields(self) -> list[tuple[str, str]]:
        """Labelled option fields for the key; include dirs appear as tags, never as paths."""
        fields = [("std", self.std), ("arch_option", self.arch or "")]
        fields += [("include", f"user{i}") for i in range(len(self.include_dirs))]
        fields += [("isystem", f"isys{i}") for i in range(len(self.isystem_dirs))]
        fields += [("define", d) for d in self.defines]
        fields += [("undefine", u) for u in self.undefines]
        fields += [("pre_include", p) for p in self.pre_includes]
        fields += [("default_device", "1" if self.default_device else "0")]
        fields += [("option", o) for o in self.passthrough]
        return fields


CUPY_FTZ = "-ftz=true"
CUPY_DEBUG = ("--device-debug", "--generate-line-info")  # CUPY_CUDA_COMPILE_WITH_DEBUG=1


def with_cupy_defaults(opts: Options) -> Options:
    """The options with what CuPy adds to every RawKernel/RawModule compile:
    ``--device-as-default-execution-space``, ``-ftz=true`` after the options (NVRTC keeps the
    last -ftz, so a ``-ftz=false`` given is overridden with NVRTC's warning, as in CuPy) and,
    under CUPY_CUDA_COMPILE_WITH_DEBUG=1, ``--device-debug --generate-line-info`` (those not
    given). CUPY_RAWCODE_CUPY_OPTIONS=0 compiles with the options as given. (CuPy's include
    directory is a search root of its own: toolchain.py.)"""
    if not config.cupy_options():
        return opts
    added: tuple[str, ...] = (CUPY_FTZ,)
    if config.cupy_debug():
        added += tuple(o for o in CUPY_DEBUG if o not in opts.passthrough)
    return opts._replace(default_device=True, passthrough=opts.passthrough + added)


def _split(name: str, items: list[str], i: int) -> tuple[str, str | None, int]:
    """(spelling, value, next index) for item i, or value None when it is no valued option."""
    item = items[i]
    head, eq, tail = item.partition("=")
    if head in _VALUED:  # -I=DIR is DIR, -D=X the macro X, -U=X: NVRTC 12.9 reads them so
        if eq:
            return head, tail, i + 1
        if i + 1 >= len(items):
            if _VALUED[head] == "include":
                return head, "", i + 1  # NVRTC takes a last -I alone: no directory
            raise RawcodeValueError(f"option {item!r} needs a value")
        return head, items[i + 1], i + 2
    if item in NEXT_VALUE:
        if i + 1 >= len(items):
            raise RawcodeValueError(f"option {item!r} needs a value (as {item}=<value>)")
        return f"{item}={items[i + 1]}", None, i + 2
    for prefix in _JOINABLE:
        if item.startswith(prefix) and len(item) > len(prefix):
            # one string with spaces, as NVRTC reads it: "-I <dir> " is "-I<dir>", "-D N=1"
            # and "-D<tab>N=1" are "-DN=1" (after -I or -U a tab stays, and names no directory
            # or is refused, as there)
            if prefix in ("-I", "-isystem"):
                return prefix, item[len(prefix) :].strip(" "), i + 1
            return prefix, item[len(prefix) :].lstrip(" \t" if prefix == "-D" else " "), i + 1
    return item, None, i + 1


def _check_macro(spelling: str, value: str, undef: bool) -> tuple[str, str | None]:
    """(the macro's head, its value or None for -U): the head is its name, or for a
    function-like ``-DF(a, b)=a+b`` (which NVRTC takes) the name with its parameter list."""
    head, eq, body = value.partition("=")
    name, paren, params = head.partition("(")
    if (
        not re.match(_IDENT, name)
        or (undef and (eq or paren))
        or (paren and not re.match(_PARAMS, params))
    ):
        raise RawcodeValueError(f"option {spelling} {value!r}: {head!r} is not a valid macro name")
    return (name, None) if undef else (head, body if eq else "1")


def macro_name(head: str) -> str:
    """The name of a macro an option defines (``F`` of a function-like ``F(a, b)``)."""
    return head.partition("(")[0]


def macro_parameters(head: str) -> tuple[str, ...] | None:
    """The parameters of a function-like macro's head (``F(a, b)``: ``("a", "b")``; ``F()``:
    ``()``), None for an object-like one."""
    _, paren, params = head.partition("(")
    if not paren:
        return None
    names = tuple(p.strip() for p in params[:-1].split(","))
    return () if names == ("",) else names


def parse_options(
    options: tuple[str, ...] | list[str] | str = (), *, cwd: str | None = None
) -> Options:
    """Normalize CuPy-style options; raise ValueError naming any malformed option."""
    if isinstance(options, str):
        options = (options,)
    items = list(options)
    for i, o in enumerate(items):
        if not isinstance(o, str):
            raise RawcodeValueError(f"option {o!r} is not a string")
        if "\0" in o or not o.isascii():  # NVRTC would cut the option at a NUL
            check_option(o, i)
    given, items = items, [o.strip(WHITESPACE) for o in items]  # as NVRTC reads each option
    base = cwd or os.getcwd()
    include: list[str] = []
    isystem: list[str] = []
    pre, passthrough, linked = [], [], []
    macros: dict[str, tuple[str, str | None]] = {}  # name -> (head, value)
    std, arch, default_device = "c++17", None, False
    i = 0
    while i < len(items):
        item = items[i]
        if not item.startswith("-"):
            raise NotAnOptionError(given[i])
        spelling, value, i = _split(item, items, i)
        kind = _VALUED.get(spelling)
        if kind is None:
            if spelling in _FLAGS:
                default_device = True
            elif spelling in JITIFY_ONLY:
                pass
            elif spelling.endswith("="):  # NVRTC 12.9 aborts the process on -dopt= or -Xptxas=
                raise RawcodeValueError(f"option {item!r} has an empty value")
            else:
                passthrough.append(spelling)  # the item, or its value joined to it by '='
            continue
        if not value and kind == "include":
            continue  # -I, -I= or ('-I', ''): NVRTC searches no directory for it
        if not value:
            raise RawcodeValueError(f"option {item!r} has an empty value")
        if kind in ("include", "isystem"):  # a '..' read as open() reads it (paths.py)
            spelled = os.path.join(base, value)
            (include if kind == "include" else isystem).append(physical(spelled))
            if has_dotdot(spelled):
                linked.append(spelled.rstrip("/"))
        elif kind in ("define", "undef"):
            if kind == "define":  # -D= X=1, --define-macro=<tab>X=1: X, to NVRTC
                value = value.lstrip(" \t")
            head, val = _check_macro(spelling, value, kind == "undef")
            name = macro_name(head)
            macros.pop(name, None)  # keep command-line order of the final state
            macros[name] = (head, val)
        elif kind == "std":
            if value not in STD_VALUES:
                raise RawcodeValueError(
                    f"option {spelling}={value}: unknown standard (use one of {STD_VALUES})"
                )
            std = value
        elif kind == "arch":
            if not is_arch(value):
                raise RawcodeValueError(f"option {spelling}={value}: expected sm_XX or compute_XX")
            arch = value if arch is None else merged_arch(arch, value)
        elif kind == "pre_include":
            pre.append(value)
    for option in passthrough:
        _check_read_file(option, base)
    return Options(
        tuple(include),
        tuple(isystem),
        tuple(macros.values()),
        std,
        arch,
        tuple(pre),
        default_device,
        tuple(passthrough),
        tuple(linked),
    )


def is_arch(text: str) -> bool:
    """True for sm_90, sm_90a, compute_90 or lto_90 (no regex: this is on a cache hit's path)."""
    kind, _, rest = text.partition("_")
    if kind not in ("sm", "compute", "lto"):
        return False
    digits = rest[:-1] if rest[-1:].islower() else rest
    return digits.isdigit() and digits.isascii()


def normalize_arch(
    arch: str | int | None,
    opts: Options,
    supported: tuple[int, ...] = (),
    nvrtc: str = "",
    after_options: bool = False,
) -> str:
    """'sm_90' from 90, '90', 'sm_90' or the options' -arch. An ``arch`` that differs from the
    options' -arch raises ValueError naming both, unless it comes ``after_options`` (a device's,
    which CuPy appends to them): then it is what NVRTC makes of the two (merged_arch). With
    ``supported`` (the SM numbers of NVRTC ``nvrtc``), an arch outside it raises too."""
    if arch is None:
        if opts.arch is None:
            raise RawcodeValueError(
                "no target architecture: pass arch= (e.g. 'sm_90') or -arch=sm_90"
            )
        text = opts.arch
    else:
        text = str(arch)
        if text.isdigit():
            text = f"sm_{text}"
        if not is_arch(text):
            raise RawcodeValueError(
                f"arch={arch!r}: expected sm_XX, compute_XX or an integer like 90"
            )
        if opts.arch is not None and after_options:
            text = merged_arch(opts.arch, text)
        elif opts.arch is not None and opts.arch != text:
            raise RawcodeValueError(
                f"arch={text!r} conflicts with the option -arch={opts.arch}: pass one of them "
                "(or the same value in both)"
            )
    if supported and arch_number(text) not in supported:
        raise RawcodeValueError(
            f"architecture {text!r} is not one NVRTC {nvrtc} can compile for; it supports "
            f"{', '.join(f'sm_{a}' for a in supported)} (compute_NN of the same for PTX)"
        )
    return text


def merged_arch(given: str, appended: str) -> str:
    """The arch NVRTC compiles for given ``-arch=given ... -arch=appended``: the last one's
    number (with a warning in its log when the numbers differ), its kind unless the first was
    real (sm_ stays), and the suffix of either, 'a' before 'f': -arch=sm_90a then -arch=sm_90
    is sm_90a, sm_100a then sm_100f is sm_100a, sm_90a then sm_80 is sm_80a, which NVRTC
    refuses (measured, NVRTC 12.9 and 13.0). parse_options folds every -arch so, in order."""
    kind, _, rest = appended.partition("_")
    if given.startswith("sm_"):  # a real kind, once given, stays: sm_90 then compute_90 is sm_90
        kind = "sm"
    suffixes = {s[-1] for s in (rest, given.partition("_")[2]) if s[-1:].islower()}
    suffix = "a" if "a" in suffixes else min(suffixes, default="")
    return f"{kind}_{arch_number(appended)}{suffix}"


def arch_number(arch: str) -> int:
    """90 for 'sm_90', 'compute_90' or 'sm_90a'."""
    return int(re.sub(r"[^0-9]", "", arch.split("_", 1)[1]))


_RDC_VALUED = ("-rdc=", "--relocatable-device-code=")


def wants_rdc(passthrough: Iterable[str]) -> bool:
    """Whether the NVRTC options ask for relocatable device code: ``-dc``/``--device-c``, or
    ``-rdc=true``/``--relocatable-device-code=true`` as the last ``-rdc=`` value (NVRTC lets
    the last one win)."""
    rdc = False
    for option in passthrough:
        if option in ("-dc", "--device-c"):
            return True
        if option.startswith(_RDC_VALUED):
            rdc = option.partition("=")[2] == "true"
    return rdc


# NVRTC options naming a file NVRTC writes (a timing report, a precompiled header) or reads
# besides the headers (a precompiled header, whose content the key does not hold): a compile
# with one always runs NVRTC, as in CuPy, so the file is written every time and never skipped
FILE_OPTIONS = ("time", "fdevice-time-trace", "create-pch", "use-pch")


def file_options(passthrough: Iterable[str]) -> list[str]:
    """The options among ``passthrough`` that name a file NVRTC writes or reads itself."""
    return [o for o in passthrough if o.lstrip("-").partition("=")[0] in FILE_OPTIONS]


def _check_read_file(option: str, cwd: str) -> None:
    """Refuse ``-use-pch=F`` where F is something NVRTC would block on or cannot read as a file
    (a FIFO, a device, a directory); a missing file is NVRTC's to report."""
    name, _, path = option.lstrip("-").partition("=")
    if name != "use-pch":
        return
    try:
        st = os.stat(os.path.join(cwd, path))
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise BadInputError(
            f"option {option}: {path} is {kind_of(st.st_mode)}, not a regular file "
            "(NVRTC would wait on it or fail)"
        )


LTO_FLAGS = ("-dlto", "--dlink-time-opt")


def wants_lto(passthrough: Iterable[str]) -> bool:
    """Whether the NVRTC options ask for LTO-IR (``-dlto``/``--dlink-time-opt``): NVRTC then
    emits no cubin, only LTO-IR, which is linked with -dc (compiler/devrt.py)."""
    return any(o in LTO_FLAGS for o in passthrough)
