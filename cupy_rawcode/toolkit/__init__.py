"""Stage 1, the toolkit: takes a header-search policy and gives the Toolchain (NVRTC's version
and architectures, the system header roots, the standard-header shims), discovered once and
remembered on disk (record.py: ``toolchain()``)."""
