"""pylucid called from a finalizer that the garbage collector runs in the
middle of another pylucid call (docs/autograd.md): a ``__del__`` of an object
in a reference cycle, or a weakref callback, may run at any allocation, and
so inside any entry point. Nothing may hang, abort, or hand one call's
result to another.

Each case runs in a child process, where a hang is a timeout and an abort a
signal exit; each failed before the fix it names.
"""

from __future__ import annotations

import pathlib
import re

import pytest

from childproc import run_code

import pylucid
from pylucid import _lib

PKG = pathlib.Path(pylucid.__file__).resolve().parent


def _ok(r, marker: str = "OK") -> None:
    out = r.stdout + r.stderr
    assert r.returncode == 0, "exit %s\n%s" % (r.returncode, out[-4000:])
    assert marker in r.stdout, out[-4000:]


def test_a_finalizer_inside_drain_does_not_deadlock() -> None:
    # Hang (before: always, within a few thousand iterations): the collector
    # ran a __del__ inside _runtime.drain() while it held a lock, and the
    # finalizer's own call drained again. Arrays the C path does not lend
    # (a subclass) are lent from Python, so every result carries items to
    # drain.
    r = run_code("""
        import faulthandler, gc, sys, weakref
        import numpy as np
        import pylucid
        from pylucid import ops
        faulthandler.dump_traceback_later(100, exit=True)
        class Sub(np.ndarray):
            pass
        class Cycle:
            def __init__(self):
                self.me = self
            def __del__(self):
                r = ops.minimum(pylucid.from_numpy(np.ones(2, np.float32).view(Sub)), np.zeros(2, np.float32))
                assert r.numpy().tolist() == [0.0, 0.0]
        class Target:
            pass
        def callback(_):
            pylucid.from_numpy(np.ones(3, np.float32).view(Sub))
        def during_collection(phase, info):  # Python code at the start of every collection
            if phase == "start":
                r = ops.minimum(pylucid.from_numpy(np.ones(2, np.float32).view(Sub)), np.zeros(2, np.float32))
                assert r.numpy().tolist() == [0.0, 0.0]
        refs = []
        for threshold, hook in ((10, False), (1, True)):
            gc.set_threshold(threshold)
            if hook:
                gc.callbacks.append(during_collection)
            for i in range(3000):
                Cycle()
                o = Target(); refs.append(weakref.ref(o, callback)); del o
                x = pylucid.from_numpy(np.arange(3, dtype=np.float32).view(Sub))
                assert x.numpy().tolist() == [0.0, 1.0, 2.0], (threshold, i)
        gc.callbacks.remove(during_collection)
        print("OK")
    """, timeout=150)
    _ok(r)


def test_results_are_not_overwritten_by_a_finalizers_call() -> None:
    # Wrong tensor (before: 1,999 of 2,000 detach() calls returned the
    # finalizer's tensor; a clamp of an array raised "invalid or released
    # tensor handle"): per-thread result buffers were shared with the
    # finalizer's nested call.
    r = run_code("""
        import gc
        import numpy as np
        import pylucid
        from pylucid import ops
        class Cycle:
            def __init__(self):
                self.me = self
            def __del__(self):
                self.r = pylucid.tensor([7.0, 8.0, 9.0]).detach()
                ops.clamp(np.full(4, 3.0, np.float32), 0.0, 1.0)
                pylucid.tensor([1.0]).grad_fn
        base = pylucid.tensor([1.0, 2.0])
        for threshold in (1, 2, 3, 4):
            gc.set_threshold(threshold)
            for i in range(1500):
                Cycle()
                d = base.detach()
                assert d.shape == (2,) and d.numpy().tolist() == [1.0, 2.0], (threshold, i, d)
                c = ops.clamp(np.ones(3, np.float32), 0.0, 0.5)
                assert c.numpy().tolist() == [0.5, 0.5, 0.5], (threshold, i, c)
                z = pylucid.zeros((2, 2))
                assert z.shape == (2, 2)
                y = ops.minimum(pylucid.tensor([1.0, 5.0], requires_grad=True), 3.0)
                assert y.grad_fn.name() == "MinimumBackward"
                y.sum().backward()
        gc.set_threshold(700)
        gc.collect()
        print("OK")
    """, timeout=150)
    _ok(r)


def test_a_finalizer_while_cffi_realizes_a_type_does_not_abort() -> None:
    # Abort (before: "realize_c_type.c:440 ... Assertion failed", exit 134, or
    # "the types are different" where cffi is built without assertions): a
    # finalizer that used pylucid ran while cffi built a C type on its first
    # use, and built it again. Every type is realized at import now.
    r = run_code("""
        import gc
        import numpy as np
        import pylucid
        from pylucid import ops
        gc.set_threshold(5)
        class Cycle:
            def __init__(self):
                self.me = self
            def __del__(self):
                ops.clamp(np.ones(3, np.float32), 0.0, 0.5)
                ops.amax(pylucid.tensor([[1.0, 2.0]]), 1, out=pylucid.tensor([0.0]))
                pylucid.tensor([1.0]).is_leaf
        for i in range(3000):
            Cycle()
            ops.clamp(pylucid.from_numpy(np.ones(3, np.float32)), 0.0, 0.5, out=np.empty(3, np.float32))
            ops.min(pylucid.tensor([[1.0, 2.0]]), 1, out=(pylucid.tensor([0.0]), pylucid.zeros(1, dtype="int64")))
            pylucid.tensor([2.0]).is_leaf
        print("OK")
    """, timeout=150)
    _ok(r)


_TYPE_STRING = re.compile(r'ffi\.(?:new|cast|typeof|sizeof)\(\s*"([^"]+)"')


def test_every_c_type_the_package_names_is_realized_at_import() -> None:
    # The list _lib realizes at import covers every type string in the
    # package's source (a new one must be added there).
    named = set()
    for path in PKG.glob("*.py"):
        named.update(_TYPE_STRING.findall(path.read_text()))
    assert named, "no ffi type strings found: the pattern is stale"
    missing = sorted(named - set(_lib.C_TYPES))
    assert not missing, missing


def test_an_error_message_is_read_before_a_finalizer_can_replace_it() -> None:
    # A failing call's message is fetched in C right after the call (the
    # library keeps one message per thread); a finalizer that fails a call
    # of its own meanwhile used to replace it.
    r = run_code("""
        import gc
        import numpy as np
        import pylucid
        from pylucid import ops
        class Cycle:
            def __init__(self):
                self.me = self
            def __del__(self):
                try:
                    ops.minimum(pylucid.tensor([1.0, 2.0, 3.0]), pylucid.tensor([1.0, 2.0]))
                except ValueError:
                    pass
        gc.set_threshold(1)
        a, b = pylucid.tensor([[1.0, 2.0]]), pylucid.tensor([1.0, 2.0, 3.0, 4.0])
        for i in range(2000):
            Cycle()
            try:
                ops.maximum(a, b)
            except ValueError as e:
                assert "(1, 2) and (4,)" in str(e), (i, str(e))
            else:
                raise AssertionError("no error")
        print("OK")
    """, timeout=150)
    _ok(r)
