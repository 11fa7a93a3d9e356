"""What an explicit ``compile()`` of a drop-in does beyond a first launch: the code of the module
loaded for its inputs (so that compile() reloads nothing, as CuPy's memo answers it, and replays
the stored log to a ``log_stream``), and the check of a kernel's name against the compiled code;
and the parameters a typed ``launch()`` binds to. Off the hit path: the classes import it when
compile() or launch() is called."""

from __future__ import annotations

import warnings

from ..ground import deferred
from .building import Code, _Build, options_module, replay

cupy = deferred("cupy")
errors = deferred("cupy_rawcode.ground.errors")
strip = deferred("cupy_rawcode.compiler.strip")
binding = deferred("cupy_rawcode.launch.bind")
signatures = deferred("cupy_rawcode.launch.signature")


def current_code(build: _Build, cc: int, log_stream=None) -> Code:
    """The code of the current device's module (of compute capability ``cc``): the one loaded
    for these inputs when there is one (its stored log replayed to ``log_stream``), else the
    build's device code, compiled or found now (the device is asked only when a module of these
    inputs is loaded somewhere)."""
    if build.codes:  # loaded on some device: ask which is current
        code = build.codes.get(cupy.cuda.runtime.getDevice())
        if code is not None:
            replay(log_stream, code.log)
            return code
    return build.device_code(cc, log_stream)


def check_defined(code: Code, name: str) -> None:
    """Raise BadInputError when ``name`` (a kernel name, or a name expression's lowered name) is
    not an entry function of the compiled code, naming those it has."""
    entries = strip.entry_functions(code.data, code.kind)
    if code.symbols.get(name, name) in entries:
        return
    spelled = {v: k for k, v in code.symbols.items()}
    own = sorted(e for e in entries if not e.startswith("__nv_"))  # not the device runtime's
    names = [f"{spelled[e]} ({e})" if e in spelled else e for e in own[:20]]
    names += [f"and {len(own) - 20} more"] if len(own) > 20 else []
    raise errors.BadInputError(
        f"kernel {name!r} is not defined in the compiled module ({code.kind}); it defines "
        + (", ".join(names) if names else "no kernel")
        + ' (an extern "C" kernel keeps its name; a template or C++ one needs its name '
        "expression, through RawModule(name_expressions=...).get_function)"
    )


def parse_signature(kernel):
    """A RawKernel's parsed parameters (launch.signature.Signature), or None with a warning
    when its declaration cannot be parsed safely (its launch() is then positional)."""
    kernel._signature_error = None
    try:
        if kernel._build.is_file:
            raise signatures.SignatureError(
                f"{kernel._build.path} is compiled code, with no source"
            )
        source, where = kernel._build.source()
        opts = options_module.parse_options(kernel._build.options)
        return binding.signature_for(source, kernel._entry, opts, where)
    except Exception as e:
        if not isinstance(e, (signatures.SignatureError, OSError, UnicodeDecodeError)):
            e = signatures.SignatureError(f"{type(e).__name__}: {e}")
        kernel._signature_error = str(e)
        warnings.warn(
            f"cupy_rawcode: cannot parse the parameters of {kernel._entry!r} ({e}); "
            "launch() takes positional arguments only and converts nothing",
            errors.SignatureWarning,
            stacklevel=3,
        )
        return None
