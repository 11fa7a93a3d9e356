"""Labelled, length-prefixed fields and their SHA-256: the one encoding behind the cache key, the
closure digest, the header manifests' and the toolchain record's ids. Defined in the ground
package itself (ground/__init__.py), which every warm hit loads anyway: one module fewer on its
imports; named here too for the modules that import them from here."""

from __future__ import annotations

from . import digest_fields, encode_fields

__all__ = ["digest_fields", "encode_fields"]
