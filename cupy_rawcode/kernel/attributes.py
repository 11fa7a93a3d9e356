"""The kernel attributes CuPy reports (cuFuncGetAttribute), two of them settable."""

from __future__ import annotations

_ATTRIBUTES = (
    "max_threads_per_block",
    "shared_size_bytes",
    "const_size_bytes",
    "local_size_bytes",
    "num_regs",
    "ptx_version",
    "binary_version",
    "cache_mode_ca",
    "max_dynamic_shared_size_bytes",
    "preferred_shared_memory_carveout",
)


def _driver_attr(name: str) -> tuple:
    """(CuPy's driver module, the CU_FUNC_ATTRIBUTE_ constant of ``name``)."""
    from cupy_backends.cuda.api import driver

    return driver, getattr(driver, "CU_FUNC_ATTRIBUTE_" + name.upper())


def _get_attr(name: str):
    """The getter of the attribute ``name``, on the kernel of the current device."""

    def get(self) -> int:
        driver, attr = _driver_attr(name)
        return driver.funcGetAttribute(attr, self.kernel.ptr)

    get.__doc__ = f"The kernel's {name} on the current device (cuFuncGetAttribute)."
    return get


def _set_attr(name: str):
    """The setter of the attribute ``name`` (cuFuncSetAttribute)."""

    def set_(self, value: int) -> None:
        driver, attr = _driver_attr(name)
        driver.funcSetAttribute(self.kernel.ptr, attr, value)

    return set_
