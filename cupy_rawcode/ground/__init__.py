"""The ground layer: what every stage stands on and that imports nothing of the pipeline above
it: file stamps (stamps.py), labelled digests (digest.py), the package's version.

The layer order, enforced by tests/test_layers.py: ground, store, toolkit, headers, key,
compiler and launch, the orchestrator, then the faces (the drop-in classes, the CuPy
integration, the worker pool, the CLI)."""

VERSION = "0.1.0"  # the package's version (pyproject.toml says the same; a test checks it)
