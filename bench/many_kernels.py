"""Twenty distinct CUB/std kernels for the many-kernel and PCH scenarios of bench/startup.py:
the corpus plus variants (other block sizes, types, primitives), each with the corpus signature
``kern(const float* x, float* y, int n)`` and the block size it launches with.

    python bench/many_kernels.py       # compile-check the list's text substitutions
"""

from __future__ import annotations

from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "corpus"
MAX_OP = "struct MaxOp { __device__ float operator()(float a, float b) const { return a > b ? a : b; } };\n"


def _edit(text: str, *pairs: tuple[str, str], before_kernel: str = "") -> str:
    for old, new in pairs:
        if old not in text:
            raise ValueError(f"variant edit {old!r} does not apply")
        text = text.replace(old, new)
    if before_kernel:
        head, sep, tail = text.partition('extern "C"')
        text = head + before_kernel + sep + tail
    return text


def kernels() -> list[tuple[str, str, int]]:
    """(name, source, threads per block), variants next to the kernel they vary, as an
    application defines them."""
    c = {p.stem: p.read_text() for p in CORPUS.glob("*.cu")}
    out = [
        ("block_reduce", c["block_reduce"], 128),
        ("block_reduce_256", _edit(c["block_reduce"], ("<float, 128>", "<float, 256>")), 256),
        ("block_reduce_double", _edit(c["block_reduce"], ("<float, 128>", "<double, 128>")), 128),
        (
            "block_reduce_max",
            _edit(c["block_reduce"], (".Sum(v)", ".Reduce(v, MaxOp())"), before_kernel=MAX_OP),
            128,
        ),
        ("block_scan", c["block_scan"], 128),
        ("block_scan_256", _edit(c["block_scan"], ("<float, 128>", "<float, 256>")), 256),
        ("block_scan_exclusive", _edit(c["block_scan"], ("InclusiveSum", "ExclusiveSum")), 128),
        (
            "block_scan_int",
            _edit(
                c["block_scan"],
                ("<float, 128>", "<int, 128>"),
                ("float v = i < n ? x[i] : 0.0f;", "int v = i < n ? (int)x[i] : 0;"),
                ("float out;", "int out;"),
            ),
            128,
        ),
        ("radix_sort", c["radix_sort"], 128),
        (
            "radix_sort_256x2",
            _edit(
                c["radix_sort"],
                ("<float, 128, 4>", "<float, 256, 2>"),
                ("items[4]", "items[2]"),
                ("j < 4", "j < 2"),
                ("threadIdx.x * 4", "threadIdx.x * 2"),
            ),
            256,
        ),
        (
            "radix_sort_descending",
            _edit(c["radix_sort"], (".Sort(items)", ".SortDescending(items)")),
            128,
        ),
        ("warp_reduce", c["warp_reduce"], 128),
        (
            "warp_reduce_double",
            _edit(c["warp_reduce"], ("WarpReduce<float>", "WarpReduce<double>")),
            128,
        ),
        (
            "warp_reduce_max",
            _edit(c["warp_reduce"], (".Sum(v)", ".Reduce(v, MaxOp())"), before_kernel=MAX_OP),
            128,
        ),
        (
            "warp_reduce_16",
            _edit(
                c["warp_reduce"],
                ("WarpReduce<float>", "WarpReduce<float, 16>"),
                ("tmp[4]", "tmp[8]"),
                ("threadIdx.x / 32", "threadIdx.x / 16"),
                ("threadIdx.x % 32", "threadIdx.x % 16"),
                ("i / 32", "i / 16"),
            ),
            128,
        ),
        ("complex", c["complex"], 128),
        ("complex_double", _edit(c["complex"], ("complex<float>", "complex<double>")), 128),
        ("std_traits", c["std_traits"], 128),
        (
            "std_traits_double",
            _edit(c["std_traits"], ("clamp_max(x[i])", "(float)clamp_max((double)x[i])")),
            128,
        ),
        ("plain", c["plain"], 128),
    ]
    assert len({s for _, s, _ in out}) == len(out) == 20
    return out


def shared_prefix(n: int) -> list[tuple[str, str, int]]:
    """``n`` BlockReduce kernels that differ after their one #include (block sizes 128, 160,
    ...): the series a PCH speeds up."""
    src = (CORPUS / "block_reduce.cu").read_text()
    return [
        (
            f"block_reduce_{128 + 32 * i}",
            _edit(src, ("<float, 128>", f"<float, {128 + 32 * i}>")),
            128,
        )
        for i in range(n)
    ]


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(CORPUS.parent.parent))
    import cupy_rawcode

    arch = sys.argv[1] if len(sys.argv) > 1 else "sm_90"
    s = cupy_rawcode.warmup(*[(src,) for _, src, _ in kernels()], arch=arch)
    print(s)
