"""The drop-ins' checks at construction: backend, options, source and kernel name."""

from __future__ import annotations  # unevaluated: less work on a warm hit

from ..ground import deferred

errors = deferred("cupy_rawcode.ground.errors")  # the classes below the roots: when raised

inputs = deferred("cupy_rawcode.ground.inputs")  # a source or name that is not plain ASCII
options_module = deferred("cupy_rawcode.headers.options")  # options given (a warm hit: none)


def _check_backend(backend: str) -> None:
    if backend not in ("nvrtc", "nvcc"):
        raise errors.RawcodeValueError(
            f"backend={backend!r} is not supported: 'nvrtc' (compiled by cupy_rawcode) or "
            "'nvcc' (handed to CuPy's own nvcc path)"
        )


def _cupy_for_nvcc(cls_name: str, args: tuple, kwargs: dict, position: int | None):
    """CuPy's own RawKernel/RawModule when the call asks for backend='nvcc', else None: nvcc
    compiles whole files with its own preprocessor, so the object is CuPy's, unchanged."""
    backend = kwargs.get("backend")
    if backend is None and position is not None and len(args) > position:
        backend = args[position]
    if backend != "nvcc":
        return None
    from cupy._core import raw  # CuPy's own classes, even where cupy.RawKernel is ours

    return getattr(raw, cls_name)(*args, **kwargs)


def _check_options(options) -> tuple[str, ...]:
    """The options as a tuple, parsed now so that a malformed one fails at construction, naming
    it (options.py is imported only when there are options: a warm hit needs it no further)."""
    if not isinstance(options, (tuple, list)) or not all(isinstance(o, str) for o in options):
        raise errors.RawcodeTypeError(f"options must be a tuple of str, not {options!r}")
    if options:
        parse_options(options)
    return tuple(options)


def _check_code(code: str) -> None:
    """A source string NVRTC would misread (a NUL byte, a lone surrogate) fails here, at
    construction, with the line of the code as given (inputs.py is imported only then)."""
    if "\0" in code or not code.isascii():
        inputs.check_source(code, "<source>")


def _check_name(name: str) -> None:
    """A kernel name with a NUL byte (the driver would look up a shorter name) fails here."""
    if "\0" in name or not name.isascii():
        inputs.check_name(name, "kernel name")


def parse_options(options):
    """options.parse_options, imported on first use (a warm hit never needs it)."""
    return options_module.parse_options(options)
