"""DLPack (docs/interop.md): zero-copy exchange with NumPy, JAX and PyTorch.

Every round trip checks that the data pointers are equal (no copy), and the
release tests check that each side's memory is released exactly once: the
library's counters (handles, outstanding exports) and the producer's
reference count come back to where they started.
"""

import ctypes
import gc
import os
import subprocess
import sys

import numpy as np
import pytest

import pylucid
from pylucid import dlpack as dl

_get_name = ctypes.pythonapi["PyCapsule_GetName"]
_get_name.restype = ctypes.c_char_p
_get_name.argtypes = [ctypes.py_object]
_get_pointer = ctypes.pythonapi["PyCapsule_GetPointer"]
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def capsule_name(c):
    return _get_name(c).decode()


def ptr(a):
    return a.__array_interface__["data"][0]


def settle():
    gc.collect()
    pylucid._collect()


def counters():
    settle()
    s = pylucid._stats()
    return s["handles"], s["dlpack"], s["borrowed"]


def strided_arrays(dtype=np.float32):
    base = np.arange(60, dtype=np.float64).reshape(3, 4, 5).astype(dtype)
    return {
        "contiguous": base,
        "sliced": base[:, 1:3, ::2],
        "negative": base[::-1, :, ::-2],
        "transposed": base.transpose(2, 0, 1),
        "broadcast": np.broadcast_to(base[:1, :, :1], (3, 4, 5)),
        "0-d": np.asarray(dtype(7)),
        "empty": base[:, :0],
    }


LAYOUTS = list(strided_arrays())
# bfloat16 is in NumPy's DLPack only once ml_dtypes registered it there
# (NumPy 2.5 with ml_dtypes 0.7): test_bfloat16_through_numpy_dlpack covers
# both cases, and JAX and PyTorch exchange it below.
DTYPES = [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64]


# ---- NumPy -> pylucid -> NumPy ----


@pytest.mark.parametrize("layout", LAYOUTS)
def test_numpy_pylucid_numpy_shares_memory(layout):
    a = strided_arrays()[layout]
    t = pylucid.from_dlpack(a)
    assert t.shape == a.shape and t.dtype is pylucid.float32
    b = np.from_dlpack(t)
    assert b.shape == a.shape and b.dtype == a.dtype
    np.testing.assert_array_equal(b, a)
    if a.size:
        assert ptr(b) == ptr(a)
        assert ptr(t.numpy()) == ptr(a)
        assert b.strides == a.strides
        assert np.shares_memory(a, b)
    assert b.flags.writeable == a.flags.writeable  # read-only memory stays read-only


@pytest.mark.parametrize("npdt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_numpy_dtypes_round_trip(npdt):
    a = (np.arange(24).reshape(4, 6) % 3).astype(npdt)[:, ::-2]
    t = pylucid.from_dlpack(a)
    assert t.dtype.numpy_dtype == np.dtype(npdt)
    assert ptr(t.numpy()) == ptr(a)
    np.testing.assert_array_equal(t.numpy(), a)
    b = np.from_dlpack(t)
    assert ptr(b) == ptr(a) and b.dtype == a.dtype
    np.testing.assert_array_equal(b, a)


def _numpy_dlpack_knows_bfloat16(bf16) -> bool:
    try:
        np.from_dlpack(np.zeros(1, bf16))
    except (BufferError, RuntimeError, TypeError):
        return False
    return True


def test_bfloat16_through_numpy_dlpack():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bits = np.array([0x3F80, 0xC040, 0x7FC1, 0x0001, 0x8000, 0x7F80], np.uint16)  # 1, -3, a NaN payload, subnormal, -0, inf
    a = bits.view(ml_dtypes.bfloat16)[::-1]
    if not _numpy_dlpack_knows_bfloat16(ml_dtypes.bfloat16):
        # NumPy refuses the capsule with its own error; nothing stays exported
        t = pylucid.from_numpy(a)
        with pytest.raises((BufferError, RuntimeError, TypeError)):
            np.from_dlpack(t)
        assert counters()[1] == 0
        return
    t = pylucid.from_dlpack(a)
    assert t.dtype is pylucid.bfloat16 and ptr(t.numpy()) == ptr(a)
    b = np.from_dlpack(t)
    assert b.dtype == a.dtype and ptr(b) == ptr(a) and b.strides == a.strides
    np.testing.assert_array_equal(b.view(np.uint16), a.view(np.uint16))  # bit for bit, the NaN's payload too
    u = pylucid.tensor([1.0, -2.5], dtype=pylucid.bfloat16) * 1  # library memory out to NumPy
    c = np.from_dlpack(u)
    assert c.dtype == ml_dtypes.bfloat16 and ptr(c) == ptr(u.numpy())
    np.testing.assert_array_equal(c.astype(np.float32), [1.0, -2.5])
    del b, c
    assert counters()[1] == 0  # both exports released with their arrays


def test_writes_are_visible_both_ways():
    t = pylucid.tensor([1.0, 2.0, 3.0]) * 1  # library memory
    b = np.from_dlpack(t)
    b[1] = 20.0
    assert t.numpy()[1] == 20.0
    a = np.zeros(3, dtype=np.float64)
    u = pylucid.from_dlpack(a)
    a[2] = 5.0
    assert u.numpy()[2] == 5.0


def test_result_of_op_on_dlpack_input():
    a = np.arange(6.0).reshape(2, 3)[:, ::-1]
    t = pylucid.from_dlpack(a)
    y = pylucid.ops.minimum(t, 2.0)
    np.testing.assert_array_equal(y.numpy(), np.minimum(a, 2.0))


# ---- capsule kinds ----


def test_versioned_capsule_when_asked():
    t = pylucid.tensor([1.0, 2.0])
    assert capsule_name(t.__dlpack__()) == "dltensor"
    assert capsule_name(t.__dlpack__(max_version=None)) == "dltensor"
    assert capsule_name(t.__dlpack__(max_version=(0, 8))) == "dltensor"
    assert capsule_name(t.__dlpack__(max_version=(1, 0))) == "dltensor_versioned"
    assert capsule_name(t.__dlpack__(max_version=(1, 3))) == "dltensor_versioned"
    assert t.__dlpack_device__() == (1, 0)
    settle()
    assert pylucid._stats()["dlpack"] == 0  # unconsumed capsules deleted their tensors


def _managed(capsule, versioned):
    name = b"dltensor_versioned" if versioned else b"dltensor"
    p = _get_pointer(capsule, name)
    return dl.ffi.cast("DLManagedTensorVersioned *" if versioned else "DLManagedTensor *", p)


def test_versioned_struct_fields():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    a.flags.writeable = False
    t = pylucid.from_numpy(a)
    c = t.__dlpack__(max_version=(1, 0))
    m = _managed(c, True)
    assert (m.version.major, m.version.minor) == (1, 0)
    assert m.flags & 1  # DLPACK_FLAG_BITMASK_READ_ONLY
    assert not m.flags & 2
    d = m.dl_tensor
    assert (d.device.device_type, d.device.device_id) == (1, 0)
    assert (d.dtype.code, d.dtype.bits, d.dtype.lanes) == (2, 32, 1)
    assert list(dl.ffi.unpack(d.shape, 2)) == [3, 2]
    assert list(dl.ffi.unpack(d.strides, 2)) == [4, 2]
    assert int(dl.ffi.cast("uintptr_t", d.data)) + d.byte_offset == ptr(a)
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__()  # the legacy struct cannot say read-only
    c2 = (pylucid.tensor([1.0]) * 1).__dlpack__(max_version=(1, 0), copy=True)
    assert _managed(c2, True).flags & 2  # DLPACK_FLAG_BITMASK_IS_COPIED
    del c, c2
    settle()
    assert pylucid._stats()["dlpack"] == 0


def test_dtype_codes():
    want = {"bool": (6, 8), "uint8": (1, 8), "int8": (0, 8), "int16": (0, 16), "int32": (0, 32),
            "int64": (0, 64), "float16": (2, 16), "bfloat16": (4, 16), "float32": (2, 32), "float64": (2, 64)}
    for name, (code, bits) in want.items():
        t = pylucid.zeros((2,), getattr(pylucid, name if name != "bool" else "bool_"))
        c = t.__dlpack__()
        d = _managed(c, False).dl_tensor
        assert (d.dtype.code, d.dtype.bits, d.dtype.lanes) == (code, bits, 1), name


class LegacyProducer:
    """A producer that predates DLPack 1.0: no keywords, legacy capsule."""

    def __init__(self, arr):
        self.arr = arr

    def __dlpack__(self, stream=None):
        return self.arr.__dlpack__()

    def __dlpack_device__(self):
        return self.arr.__dlpack_device__()


def test_consumes_legacy_and_versioned_capsules():
    a = np.arange(10.0)[::3]
    for src in (a, LegacyProducer(a), a.__dlpack__(), a.__dlpack__(max_version=(1, 0))):
        t = pylucid.from_dlpack(src)
        assert ptr(t.numpy()) == ptr(a)
        np.testing.assert_array_equal(t.numpy(), a)


# ---- release exactly once ----


def test_pylucid_export_released_exactly_once():
    t = pylucid.tensor(np.arange(8.0)) * 1
    h0, live0, _ = counters()
    assert live0 == 0
    for kw in ({}, {"max_version": (1, 0)}):
        b = np.from_dlpack(t) if not kw else np.from_dlpack(t, copy=False)
        assert pylucid._stats()["dlpack"] == 1
        c = t.__dlpack__(**kw)  # never consumed
        assert pylucid._stats()["dlpack"] == 2
        del c, b
        assert counters()[:2] == (h0, 0)
    # the consumer keeps the tensor's memory alive after the tensor is gone
    b = np.from_dlpack(t)
    p = ptr(b)
    del t
    settle()
    assert pylucid._stats()["dlpack"] == 1
    np.testing.assert_array_equal(b, np.arange(8.0))
    assert ptr(b) == p
    del b
    assert counters()[:2] == (h0 - 1, 0)


def test_numpy_producer_released_exactly_once():
    a = np.arange(1000.0).reshape(10, 100)[:, ::7]
    r0 = sys.getrefcount(a)
    _, _, borrowed0 = counters()
    t = pylucid.from_dlpack(a)
    assert sys.getrefcount(a) == r0 + 1  # NumPy's manager context holds the array
    y = t.detach()
    del t
    settle()
    assert sys.getrefcount(a) == r0 + 1  # y still uses the memory
    del y
    settle()
    assert sys.getrefcount(a) == r0  # released once (twice would drop below r0)
    assert counters()[2] == borrowed0


def test_producer_kept_alive_by_the_tensor():
    a = np.arange(100_000, dtype=np.float64)
    expect = a.copy()
    t = pylucid.from_dlpack(a[::-1])
    del a
    gc.collect()
    junk = [np.full(100_000, -1.0) for _ in range(20)]  # reuse freed memory, if any was freed
    np.testing.assert_array_equal(t.numpy(), expect[::-1])
    del junk


def test_pylucid_to_pylucid():
    t = pylucid.from_numpy(np.arange(12.0).reshape(3, 4)[:, ::2])
    h0, live0, _ = counters()
    u = pylucid.from_dlpack(t)
    assert ptr(u.numpy()) == ptr(t.numpy())
    assert pylucid._stats()["dlpack"] == live0 + 1
    del u
    assert counters()[:2] == (h0, live0)


def test_errors_release_the_producer():
    a = np.arange(4, dtype=np.complex64)
    r0 = sys.getrefcount(a)
    with pytest.raises(TypeError, match="complex"):
        pylucid.from_dlpack(a)
    u = np.arange(4, dtype=np.uint16)
    with pytest.raises(TypeError, match="uint16"):
        pylucid.from_dlpack(u)
    gc.collect()
    assert sys.getrefcount(a) == r0
    c = np.arange(3.0).__dlpack__()
    pylucid.from_dlpack(c)
    with pytest.raises(BufferError, match="already consumed"):
        pylucid.from_dlpack(c)
    with pytest.raises(TypeError, match="__dlpack__"):
        pylucid.from_dlpack([1.0, 2.0])


def test_taking_a_capsule_renames_it_and_refuses_other_capsules():
    # The C extension checks the capsule's name, takes its pointer and renames
    # it "used_..." (the DLPack protocol); other capsules are left untouched.
    for max_version, name in ((None, "dltensor"), ((1, 0), "dltensor_versioned")):
        c = np.arange(3.0).__dlpack__(max_version=max_version)
        t = pylucid.from_dlpack(c)
        assert capsule_name(c) == "used_" + name
        np.testing.assert_array_equal(t.numpy(), [0.0, 1.0, 2.0])
        with pytest.raises(BufferError, match="already consumed"):
            pylucid.from_dlpack(c)
    import datetime
    other = datetime.datetime_CAPI
    with pytest.raises(TypeError, match="not a DLPack capsule"):
        pylucid.from_dlpack(other)
    assert capsule_name(other) == "datetime.datetime_CAPI"
    with pytest.raises(TypeError):
        dl._hot.dlpack_take(object())  # not a capsule at all: a clear error, never a crash


class GPUThing:
    called = False

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, **kw):
        GPUThing.called = True
        raise AssertionError("must not be called")


def test_non_cpu_device_is_refused():
    with pytest.raises(BufferError, match="kDLCUDA"):
        pylucid.from_dlpack(GPUThing())
    assert not GPUThing.called
    with pytest.raises(BufferError):
        pylucid.from_dlpack(np.arange(3.0), device="cuda")


def test_export_errors():
    t = pylucid.tensor([1.0, 2.0])
    with pytest.raises(BufferError, match="stream"):
        t.__dlpack__(stream=1)
    with pytest.raises(BufferError, match="device"):
        t.__dlpack__(dl_device=(2, 0))
    assert capsule_name(t.__dlpack__(dl_device=(1, 0))) == "dltensor"
    g = pylucid.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="detach"):
        g.__dlpack__()
    b = np.from_dlpack(g.detach())
    assert b[0] == 1.0


def test_copy_flags():
    t = pylucid.tensor([1.0, 2.0]) * 1
    b = np.from_dlpack(t, copy=True)  # NumPy asks the producer for a copy
    assert ptr(b) != ptr(t.numpy())
    np.testing.assert_array_equal(b, [1.0, 2.0])
    a = np.arange(3.0)
    u = pylucid.from_dlpack(a, copy=True)
    assert ptr(u.numpy()) != ptr(a)
    np.testing.assert_array_equal(u.numpy(), a)
    assert ptr(pylucid.from_dlpack(a, copy=False).numpy()) == ptr(a)


def test_requires_grad_on_imported_tensor():
    a = np.array([1.0, 5.0, 3.0])
    t = pylucid.from_dlpack(a).requires_grad_()
    y = pylucid.ops.minimum(t, np.array([2.0, 2.0, 3.0]))
    y.sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), [1.0, 0.0, 1.0])
    np.testing.assert_array_equal(a, [1.0, 5.0, 3.0])  # nothing wrote into the input


# ---- JAX (a second partner: legacy capsules, immutable buffers) ----


def test_jax_round_trips():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    j = jnp.arange(24, dtype=jnp.float32).reshape(4, 6)
    h0, live0, _ = counters()
    t = pylucid.from_dlpack(j)
    assert ptr(t.numpy()) == j.unsafe_buffer_pointer()
    np.testing.assert_array_equal(t.numpy(), np.asarray(j))
    # pylucid -> JAX: library memory is 64-byte aligned, which XLA shares
    y = pylucid.ops.maximum(t, 3.0)
    k = jnp.from_dlpack(y)
    assert k.unsafe_buffer_pointer() == ptr(y.numpy())
    np.testing.assert_array_equal(np.asarray(k), np.maximum(np.asarray(j), 3.0))
    # and back again: the same memory
    back = pylucid.from_dlpack(k)
    assert ptr(back.numpy()) == ptr(y.numpy())
    del t, y, k, back
    assert counters()[:2] == (h0, live0)


def test_jax_dtypes_and_strided():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    for jdt, pdt in ((jnp.bfloat16, pylucid.bfloat16), (jnp.float16, pylucid.float16), (jnp.int32, pylucid.int32),
                     (jnp.bool_, pylucid.bool_)):
        j = (jnp.arange(6) % 2).astype(jdt)
        t = pylucid.from_dlpack(j)
        assert t.dtype is pdt
        np.testing.assert_array_equal(t.numpy(), np.asarray(j))
        k = jnp.from_dlpack(t * 1 if pdt is not pylucid.bool_ else t)
        assert k.dtype == j.dtype
        np.testing.assert_array_equal(np.asarray(k), np.asarray(j))
    # a transposed (strided) pylucid view: XLA accepts permuted layouts
    base = pylucid.zeros((3, 4)) + np.arange(12, dtype=np.float32).reshape(3, 4)
    tt = pylucid.from_numpy(base.numpy().T)
    k = jnp.from_dlpack(tt)
    np.testing.assert_array_equal(np.asarray(k), base.numpy().T)


# ---- PyTorch (when installed) ----


@pytest.mark.parametrize("layout", ["contiguous", "sliced", "transposed", "broadcast"])
def test_torch_round_trips(layout):
    torch = pytest.importorskip("torch")
    x = torch.arange(60, dtype=torch.float32).reshape(3, 4, 5)
    x = {"contiguous": x, "sliced": x[:, 1:3, ::2], "transposed": x.permute(2, 0, 1),
         "broadcast": x[:1, :, :1].expand(3, 4, 5)}[layout]
    h0, live0, _ = counters()
    t = pylucid.from_dlpack(x)
    assert ptr(t.numpy()) == x.data_ptr()
    np.testing.assert_array_equal(t.numpy(), x.numpy())
    # pylucid -> torch -> pylucid: one buffer throughout
    z = torch.from_dlpack(t)
    assert z.data_ptr() == x.data_ptr() and z.stride() == x.stride()
    back = pylucid.from_dlpack(z)
    assert ptr(back.numpy()) == x.data_ptr()
    y = pylucid.ops.minimum(t, 10.0)
    w = torch.from_dlpack(y)
    assert w.data_ptr() == ptr(y.numpy())
    assert torch.equal(w, torch.clamp(x, max=10.0))
    del t, z, back, y, w
    assert counters()[:2] == (h0, live0)


def test_torch_dtypes_and_release():
    torch = pytest.importorskip("torch")
    for tdt, pdt in ((torch.bfloat16, pylucid.bfloat16), (torch.float16, pylucid.float16), (torch.bool, pylucid.bool_),
                     (torch.int64, pylucid.int64), (torch.uint8, pylucid.uint8)):
        x = (torch.arange(6) % 2).to(tdt)
        t = pylucid.from_dlpack(x)
        assert t.dtype is pdt and ptr(t.numpy()) == x.data_ptr()
        z = torch.from_dlpack(t)
        assert z.dtype == tdt and z.data_ptr() == x.data_ptr()
    del x, t, z
    # torch as the consumer: its deleter call drops the library's reference
    h0, live0, _ = counters()
    z = torch.from_dlpack(pylucid.tensor([1.0, 2.0]) * 1)
    assert pylucid._stats()["dlpack"] == live0 + 1
    del z
    assert counters()[:2] == (h0, live0)


# ---- fork ----

FORK_SCRIPT = r"""
import gc, os, sys
import numpy as np
import pylucid

t = pylucid.tensor([1.0, 2.0]) * 1
c = t.__dlpack__()                      # never consumed
arr = np.from_dlpack(t)                 # NumPy holds an export
u = pylucid.from_dlpack(np.arange(3.0))
pid = os.fork()
if pid == 0:
    code = 0
    for name, f in (("export", lambda: t.__dlpack__()), ("import", lambda: pylucid.from_dlpack(np.ones(2)))):
        try:
            f()
            print("child: %s did not raise" % name, flush=True)
            code = 2
        except RuntimeError as e:
            if "spawn" not in str(e):
                code = 3
    del c, arr, u, t  # deleters run here: they must not call into the dead Go runtime
    gc.collect()
    sys.exit(code)
_, status = os.waitpid(pid, 0)
print("CHILD_EXIT", os.waitstatus_to_exitcode(status), flush=True)
del c, arr
gc.collect()
print("PARENT_LIVE", pylucid._stats()["dlpack"], flush=True)
"""


def test_fork_child_never_calls_into_go():
    r = subprocess.run([sys.executable, "-c", FORK_SCRIPT], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "CHILD_EXIT 0" in r.stdout, r.stdout + r.stderr
    assert "PARENT_LIVE 0" in r.stdout, r.stdout + r.stderr
