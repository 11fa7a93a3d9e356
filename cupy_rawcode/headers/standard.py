"""The C++ standard a compile runs at: the one asked for, raised to the floor its headers need.

Jitify-era kernels ask for C++11 or C++14 (``-std=c++11``), while CCCL 3.x refuses anything
older than C++17 with an ``#error`` (``#if _CCCL_STD_VER < 2017`` / ``#error ... requires at
least C++ 17``). The floor is read from the headers themselves: the scan of each header notes
the year of such a guard (scan.std_floor), and a closure's floor is the highest among the
headers NVRTC can reach: fast mode's closure follows every branch, so when that is above the
asked standard the includes in branches no NVRTC compile takes are left out (liveness.py:
``cuda_fp16.h``'s host-only ``#include <cstring>`` raises nothing).
When the asked standard is below it, the compile runs at the floor, with one warning, unless
CUPY_RAWCODE_RAISE_STD=0. A closure that needs nothing more keeps the asked standard.
"""

from __future__ import annotations

import re
import warnings
from typing import NamedTuple

from ..ground.errors import RawcodeWarning
from ..ground.log import first_time
from .options import STD_VALUES

_YEAR = {"c++03": 2003, "c++11": 2011, "c++14": 2014, "c++17": 2017, "c++20": 2020}

# `#if _CCCL_STD_VER < 2017` (or `__cplusplus < 201703L`) directly followed by an #error:
# the header refuses older standards outright (a deprecation message is no floor)
FLOOR_GUARD = re.compile(
    rb"#[ \t]*if[ \t]+(?:_CCCL_STD_VER[ \t]*<[ \t]*(\d{4})|__cplusplus[ \t]*<[ \t]*(\d{4})\d\dL?)"
    rb"[^\n]*\n(?:[ \t]*//[^\n]*\n)*[ \t]*#[ \t]*error\b"
)


class Floor(NamedTuple):
    """The lowest standard a closure accepts: ``year`` (0: any) and the header that says so."""

    year: int = 0
    header: str = ""


NO_FLOOR = Floor()


def guard_year(data: bytes) -> int:
    """The highest standard year a file's ``#error`` guards demand (0 when it has none)."""
    if b"#" not in data or (b"_CCCL_STD_VER" not in data and b"__cplusplus" not in data):
        return 0
    years = [int(a or b) for a, b in FLOOR_GUARD.findall(data)]
    return max(years, default=0)


def std_year(std: str) -> int:
    """2011 for 'c++11'."""
    return _YEAR[std]


def std_for_year(year: int) -> str:
    """The lowest standard value at or above ``year`` ('c++17' for 2017)."""
    for std in STD_VALUES:
        if _YEAR[std] >= year:
            return std
    return STD_VALUES[-1]


def effective_std(asked: str, floor: Floor, raise_to_floor: bool) -> str:
    """The standard NVRTC gets: ``asked``, or the floor's when it is higher and raising is on."""
    if raise_to_floor and floor.year > std_year(asked):
        return std_for_year(floor.year)
    return asked


class StandardRaisedWarning(RawcodeWarning, UserWarning):
    """A kernel asked for an older C++ standard than its headers accept; it was compiled at the
    lowest one they accept."""


def drops_register(asked: str, used: str) -> bool:
    """C++17 removed the ``register`` storage class that C++11 code may still use (it meant
    nothing since C++11): a raise across 2017 defines it away."""
    return std_year(asked) < 2017 <= std_year(used)


def at_standard(opts, used: str):
    """``opts`` (an Options) compiled at ``used``: the std replaced and, across C++17, ``register``
    defined as nothing (unless the options define it themselves)."""
    if used == opts.std:
        return opts
    macros = opts.macros
    if drops_register(opts.std, used) and not any(n == "register" for n, _ in macros):
        macros = macros + (("register", ""),)
    return opts._replace(std=used, macros=macros)


def raised_message(program: str, asked: str, used: str, floor: Floor) -> str:
    extra = (
        " (with `register`, which C++17 removed, defined away)"
        if drops_register(asked, used)
        else ""
    )
    return (
        f"cupy-rawcode: {program} asks for -std={asked}, but {floor.header} needs at least "
        f"C++{used[3:]}, so it is compiled with -std={used}{extra}; set "
        f"CUPY_RAWCODE_RAISE_STD=0 to compile with -std={asked} as asked"
    )


def warn_raised(program: str, asked: str, used: str, floor: Floor) -> None:
    """One StandardRaisedWarning per process for each (asked, used) pair."""
    if not first_time(("standard raised", asked, used)):
        return
    warnings.warn(raised_message(program, asked, used, floor), StandardRaisedWarning, stacklevel=2)
