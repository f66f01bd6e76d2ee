# The compiled cffi extension (API mode), built by _ffi_build.py. The library
# is reached through `lib: Any`, as in ABI mode.
from typing import Any

ffi: Any
lib: Any
