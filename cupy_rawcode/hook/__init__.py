"""The CuPy integration: CuPy's compile function wrapped (install.py), every CuPy compile through
the store (compiles.py) and the record of compiles (recording.py). The .pth start-up hook stays
at the top (autoinstall.py), under the name installed environments call."""
