"""Turns lucid.h into the cffi cdef of the binding.

Imports nothing from the package: the extension builder (``_ffi_build.py``,
run by setup.py and tools/devbuild.sh) loads this file by path at build time,
and ``_lib.py`` uses it for the ABI-mode fallback.
"""

from __future__ import annotations

import re

_CONSTANT = re.compile(r"#define\s+LUCID_[A-Z0-9_]+\s+-?\d+\s*$")


def cdef(header: str) -> str:
    """Turns lucid.h into a cffi cdef: keep #define constants, drop other
    preprocessor lines (include guards, includes, the prototype guard)."""
    out = []
    for line in header.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            if _CONSTANT.match(stripped):
                out.append(stripped)
            continue
        out.append(line)
    return "\n".join(out)
