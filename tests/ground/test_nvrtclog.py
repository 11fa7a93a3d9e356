"""NVRTC's log read in one module (nvrtclog.py): diagnostics, the lines errors point at, the
names errors use, errors inside a library's headers, and the standard a header requires."""

from __future__ import annotations

from cupy_rawcode.ground.nvrtclog import (
    Diagnostic,
    clean_log,
    diagnostics,
    error_lines,
    error_texts,
    errors_inside,
    names_in,
    option_refusal,
    required_standard,
)

LOG = (
    'kernel.cu(2): error: identifier "nope" is undefined\n'
    "    nope();\n"
    "    ^\n"
    'kernel.cu(5): warning #177-D: variable "v" was declared but never referenced\n'
    "    operand types are: int + float\n"
    '/usr/include/thrust/sort.h(40): catastrophic error: no operator "+" matches\n'
    "    operand types are: a + b\n"
    '2 errors detected in the compilation of "kernel.cu".\n'
)


def test_diagnostics_split_file_line_severity_message_and_details():
    found = diagnostics(LOG)
    assert [(d.file, d.line, d.severity) for d in found] == [
        ("kernel.cu", 2, "error"),
        ("kernel.cu", 5, "warning"),
        ("/usr/include/thrust/sort.h", 40, "catastrophic error"),
    ]
    assert found[0] == Diagnostic("kernel.cu", 2, "error", 'identifier "nope" is undefined')
    assert found[1].details == ("    operand types are: int + float",)
    assert [d.is_error for d in found] == [True, False, True]


def test_error_lines_and_texts():
    assert error_lines(LOG, "kernel.cu") == [2]
    assert error_lines(LOG, "other.cu") == []
    assert list(error_texts(LOG)) == [
        'identifier "nope" is undefined',
        'no operator "+" matches',
        "    operand types are: a + b",
    ]


def test_names_in_reads_a_missing_namespace_member_as_qualified():
    assert names_in('namespace "std" has no member "stack"') == ["std::stack"]
    # a base class or a template that does not exist: NVRTC says which kind it looked for
    assert names_in('namespace "thrust" has no member class "unary_function"') == [
        "thrust::unary_function"
    ]
    assert names_in('namespace "cub" has no member template "Max"') == ["cub::Max"]
    assert names_in('identifier "std::vector" is undefined')[:2] == ["identifier", "std::vector"]


def test_errors_inside_a_library():
    assert errors_inside(LOG, "thrust")
    assert not errors_inside(LOG, "cub")
    assert not errors_inside(LOG.replace("catastrophic error", "warning"), "thrust")


def test_required_standard():
    log = (
        "cpp_dialect.h(24): catastrophic error: #error directive: libcu++ requires at least C++ 17"
    )
    assert required_standard(log) == "17"
    assert required_standard(LOG) is None


def test_clean_log_and_option_refusal():
    assert clean_log("a\nprecompiled header x\nb\x00") == "a\nb"
    assert clean_log(" \x00") == ""
    assert option_refusal("nvrtc: error: invalid option --x found\x00") == "invalid option --x"
