"""How much pylucid.jax's jax.pure_callback path costs against an XLA FFI
handler (bench/jax_ffi_prototype.cc: forward minimum, float32), jnp.minimum
and a callback that does nothing, jitted, at 1,000 and 2^24 elements.

    python3 bench/jax_ffi_prototype.py      # needs JAX and a C++ compiler

A measurement prototype, not part of the package (docstring of
python/pylucid/jax.py).
"""

from __future__ import annotations

import ctypes
import pathlib
import subprocess
import sys
import tempfile
import time
from typing import Callable

import numpy as np

import jax
import jax.numpy as jnp

import pylucid
import pylucid.jax as pj
from pylucid import ops

HERE = pathlib.Path(__file__).resolve().parent


def median_time(fn: Callable[[], object], reps: int) -> float:
    fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return sorted(ts)[reps // 2]


def main() -> int:
    native = pathlib.Path(pylucid.__file__).parent / "_native"
    out = pathlib.Path(tempfile.mkdtemp()) / "libpylucid_jax_ffi.so"
    subprocess.run(["g++", "-O2", "-std=c++17", "-shared", "-fPIC", "-w", "-I", jax.ffi.include_dir(),
                    "-I", str(native), str(HERE / "jax_ffi_prototype.cc"), "-L", str(native), "-llucid",
                    "-Wl,-rpath," + str(native), "-o", str(out)], check=True)
    lib = ctypes.CDLL(str(out))
    lib.set_minimum_id(ops._ids["minimum"])
    jax.ffi.register_ffi_target("pylucid_minimum", jax.ffi.pycapsule(lib.PylucidMinimum), platform="cpu")

    def ffi_minimum(a: jax.Array, b: jax.Array) -> jax.Array:
        call = jax.ffi.ffi_call("pylucid_minimum", jax.ShapeDtypeStruct(a.shape, a.dtype),
                                vmap_method="broadcast_all")
        return call(a, b)  # type: ignore[no-any-return]

    print("%-10s %14s %14s %14s %14s" % ("elements", "noop callback", "pylucid.jax", "FFI prototype", "jnp.minimum"))
    for n, reps in ((1000, 300), (1 << 24, 7)):
        rng = np.random.default_rng(0)
        a = jnp.asarray(rng.standard_normal(n).astype(np.float32))
        b = jnp.asarray(rng.standard_normal(n).astype(np.float32))
        res = np.zeros(n, np.float32)
        noop = jax.jit(lambda a, b: jax.pure_callback(lambda x, y: res, jax.ShapeDtypeStruct(a.shape, a.dtype), a, b,
                                                      vmap_method="broadcast_all"))
        fns = [noop, jax.jit(pj.minimum), jax.jit(ffi_minimum), jax.jit(jnp.minimum)]
        want = np.asarray(fns[1](a, b)).view(np.uint32)
        assert np.array_equal(np.asarray(fns[2](a, b)).view(np.uint32), want)  # the same bits
        times = [median_time(lambda: f(a, b).block_until_ready(), reps) for f in fns]
        print("%-10d" % n + "".join("%11.3f ms" % (t * 1e3) for t in times))
    return 0


if __name__ == "__main__":
    sys.exit(main())
