"""NVRTC's log, read in one place: cleaned of what is never shown, split into diagnostics (file,
line, severity, message and the indented lines that belong to it), and asked the few questions
the error messages and hints need. Pure functions of the log's text; this module imports nothing
of the package (errors.py and compiler/, its stub hints included, all read the log through it)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

# the patterns below are compiled on first use (re's own cache keeps them): a compile with an
# empty log, the usual one, never pays for them
PCH_WORDS = (
    "precompiled header",
    "pch file",
    "initial sequence of preprocessing directives",
    "command line options do not match",
)  # NVRTC's PCH messages: never shown

# 'kernel.cu(3): error: identifier "x" is undefined', 'a.h(9): catastrophic error: ...',
# 'k.cu(2): warning #177-D: ...': the file runs to the first "(line): "
_DIAGNOSTIC = r"(\S.*?)\((\d+)\): (error|warning|catastrophic error|remark)[^:]*: (.*)"
# the indented lines NVRTC writes under a diagnostic's first line that belong to its message
# (never the echoed source line, nor the caret under it)
_DETAIL = r"\s+(operand types|argument types|object type|detected during|\w+ type is)"
_ERRORS = ("error", "catastrophic error")
# 'namespace "cub" has no member "Max"', and '... has no member class "unary_function"' (a base)
_NO_MEMBER = r'namespace "(\w+)" has no member (?:class |struct |template )?"(\w+)"'
_NAME = r"(?<![\w:])((?:\w+::)?\w+)"
_TOO_OLD = r"error[^\n]*requires at least C\+\+ ?(\d\d)"
# 'incomplete type "T [48][32]" (aka "float16 [48][32]") is not allowed': the aka spelling wins
_INCOMPLETE = r'incomplete type "([^"]*)"(?: \(aka "([^"]*)"\))?'
_UNDEFINED = r'identifier "(\w+)" is undefined'
_UNOPENED = r'cannot open source file "([^"\n]*)"'  # a missing header, as its include spells it

_OPTION_PREFIX, _OPTION_SUFFIX = "nvrtc: error: ", " found"


class Diagnostic(NamedTuple):
    """One diagnostic of NVRTC's log: where, how bad, what (and the detail lines after it)."""

    file: str  # as NVRTC names it: the program's name, or a header's path
    line: int
    severity: str  # 'error', 'catastrophic error', 'warning' or 'remark'
    message: str
    details: tuple[str, ...] = ()  # 'operand types are: ...' and the like, as written

    @property
    def is_error(self) -> bool:
        """Whether it stops the compile (an error or a catastrophic error)."""
        return self.severity in _ERRORS


def clean_log(log: str) -> str:
    """NVRTC's log without its trailing NUL and without any precompiled-header message."""
    log = log.replace("\x00", "")
    if any(w in log.lower() for w in PCH_WORDS):
        log = "".join(
            line
            for line in log.splitlines(keepends=True)
            if not any(w in line.lower() for w in PCH_WORDS)
        )
    return log if log.strip() else ""


def option_refusal(log: str) -> str:
    """What NVRTC said about an option it refused (its log for an empty program), without its
    'nvrtc: error: ' prefix and ' found' suffix; '' when it said nothing."""
    words = clean_log(log).strip()
    return words.removeprefix(_OPTION_PREFIX).removesuffix(_OPTION_SUFFIX)


def diagnostics(log: str) -> list[Diagnostic]:
    """Every diagnostic of the log in order, each with its detail lines."""
    out: list[Diagnostic] = []
    for line in log.splitlines():
        m = re.match(_DIAGNOSTIC, line)
        if m:
            file, number, severity, message = m.groups()
            out.append(Diagnostic(file, int(number), severity, message))
        elif out and re.match(_DETAIL, line):
            last = out[-1]
            out[-1] = last._replace(details=last.details + (line,))
    return out


def error_lines(log: str, file: str) -> list[int]:
    """The lines of ``file`` (the program's name) that NVRTC's errors point at, in log order."""
    return [d.line for d in diagnostics(log) if d.is_error and d.file.endswith(file)]


def error_texts(log: str, outside: tuple[str, ...] = ()) -> Iterator[str]:
    """Each error's message and detail lines, one text each, in log order; with ``outside``,
    only the errors that point into none of those directories (``errors_inside``)."""
    for d in diagnostics(log):
        if d.is_error and not any(_inside(d, directory) for directory in outside):
            yield d.message
            yield from d.details


def names_in(text: str) -> list[str]:
    """The names an error text uses, in order, as (optionally once-qualified) identifiers:
    ``namespace "std" has no member "stack"`` (or ``has no member class "stack"``) reads as
    ``std::stack``."""
    return re.findall(_NAME, re.sub(_NO_MEMBER, r'"\1::\2"', text))


def incomplete_types(log: str) -> list[str]:
    """The types NVRTC's errors call incomplete, as the log spells them (its "aka" spelling when
    it gives one), in log order: ``float16 [32]``."""
    return [
        aka or spelled
        for text in error_texts(log)
        for spelled, aka in re.findall(_INCOMPLETE, text)
    ]


def undefined_identifiers(log: str) -> list[str]:
    """The identifiers NVRTC's errors call undefined, in log order (repeats kept)."""
    return [name for text in error_texts(log) for name in re.findall(_UNDEFINED, text)]


def unopened_files(log: str) -> list[tuple[str, int, str]]:
    """(includer as NVRTC names it, line, header as the include spells it) of each header
    NVRTC's errors say it cannot open, in order."""
    return [
        (d.file, d.line, name)
        for d in diagnostics(log)
        if d.is_error
        for name in re.findall(_UNOPENED, d.message)
    ]


def errors_inside(log: str, directory: str) -> bool:
    """Whether an error points into a header under a ``/<directory>/`` of its path (e.g.
    'thrust'): the library's own code refused, not the user's."""
    return any(d.is_error and _inside(d, directory) for d in diagnostics(log))


def _inside(d: Diagnostic, directory: str) -> bool:
    """Whether a diagnostic points into a header under a ``/<directory>/`` of its path."""
    return f"/{directory}/" in d.file and not any(c.isspace() for c in d.file)


def required_standard(log: str) -> str | None:
    """The C++ standard ('17', '20') an error says a header requires at least, or None."""
    m = re.search(_TOO_OLD, log)
    return None if m is None else m.group(1)
