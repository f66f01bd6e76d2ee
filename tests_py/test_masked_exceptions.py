"""An exception raised while pylucid objects are dropped reaches the caller
unchanged (docs/errors.md): DLPack capsule destructors and the Tensor's C
deallocator keep the error indicator as they found it. Each case runs in a
subprocess (a masked exception surfaces as SystemError, or worse)."""

import subprocess
import sys
import textwrap

import pytest

PRELUDE = textwrap.dedent("""
    import gc, sys
    import numpy as np
    import pylucid
    from pylucid import dlpack

    def drop_while_raising(make, exc):
        # list() drops the half-built list, and the only reference to make()'s
        # object with it, while exc is set
        def gen():
            yield make()
            raise exc
        return list(gen())

    def caught(fn):
        try:
            fn()
        except BaseException as e:
            return type(e), str(e)
        raise AssertionError("no exception")
""")


def _run(body: str, *, c_destructor: bool = True, without_ml_dtypes: bool = False) -> str:
    # without_ml_dtypes: the subprocess cannot import ml_dtypes (None in sys.modules)
    code = ("import sys\nsys.modules['ml_dtypes'] = None\n" if without_ml_dtypes else "") + PRELUDE + ("" if c_destructor else "dlpack._hot = None\n") + textwrap.dedent(body)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_numpy_rejecting_a_bfloat16_capsule_raises_its_own_error() -> None:
    # NumPy rejects bfloat16 capsules unless ml_dtypes told it the dtype
    # (NumPy 2.5 with ml_dtypes 0.7 accepts them): the subprocess blocks
    # ml_dtypes, so the rejection happens on every NumPy. A bfloat16 tensor
    # made from Python floats needs no ml_dtypes.
    out = _run("""
        assert sys.modules["ml_dtypes"] is None
        t = pylucid.tensor([1.0], dtype=pylucid.bfloat16)
        cap = t.__dlpack__(max_version=(1, 0))

        class Held:  # the capsule stays referenced: no destructor runs while NumPy raises
            def __dlpack__(self, **kw):
                return cap

            def __dlpack_device__(self):
                return (1, 0)

        want = caught(lambda: np.from_dlpack(Held()))
        got = caught(lambda: np.from_dlpack(t))  # NumPy drops the capsule while raising
        assert got == want and want[0] is not SystemError, (got, want)
        del cap
        gc.collect()
        assert pylucid._stats()["dlpack"] == 0, pylucid._stats()  # the rejected export was deleted
        print(want[0].__name__)
    """, without_ml_dtypes=True)
    assert out.strip() and out.strip() != "SystemError"


@pytest.mark.parametrize("versioned", [True, False])
def test_a_consumer_that_raises_after_taking_the_capsule_keeps_its_exception(versioned: bool) -> None:
    _run("""
        t = pylucid.tensor([1.0, 2.0])
        err = ValueError("consumer failed: boom")
        got = caught(lambda: drop_while_raising(lambda: t.__dlpack__(max_version=(1, 0) if %s else None), err))
        assert got == (ValueError, "consumer failed: boom"), got
        del t
        gc.collect()
        assert pylucid._stats()["dlpack"] == 0, pylucid._stats()
    """ % versioned)


def test_without_the_c_extension_dlpack_raises_a_clear_error() -> None:
    # Capsules are made and taken only in C (python/csrc): a Python destructor
    # would run with the consumer's exception set and mask it (SystemError).
    # Without the extension (ABI mode), DLPack says so plainly.
    out = _run("""
        t = pylucid.tensor([1.0, 2.0])
        for fn in (t.__dlpack__, lambda: t.__dlpack__(max_version=(1, 0)), lambda: np.from_dlpack(t),
                   lambda: pylucid.from_dlpack(np.arange(3.0)),
                   lambda: pylucid.from_dlpack(np.arange(3.0).__dlpack__())):
            got = caught(fn)
            assert got[0] is RuntimeError and "compiled extension" in got[1], got
        got = caught(lambda: drop_while_raising(lambda: pylucid.tensor([1.0]), ValueError("boom")))
        assert got == (ValueError, "boom"), got
        gc.collect()
        assert pylucid._stats()["dlpack"] == 0, pylucid._stats()
        print("ok")
    """, c_destructor=False)
    assert out.strip() == "ok"


def test_tensors_and_nodes_dropped_while_raising_keep_the_exception() -> None:
    _run("""
        from pylucid import ops
        for make in (lambda: pylucid.tensor([1.0]),                       # batched release
                     lambda: pylucid.tensor(np.zeros(10000, np.float32)),  # released at once
                     lambda: pylucid.tensor(np.zeros((2, 3), np.float32)),
                     lambda: ops.minimum(pylucid.tensor([1.0], requires_grad=True), 0.5),  # holds a graph
                     lambda: ops.minimum(pylucid.tensor([1.0], requires_grad=True), 0.5).grad_fn):
            got = caught(lambda: drop_while_raising(make, KeyError("k")))
            assert got == (KeyError, "'k'"), got
    """)
