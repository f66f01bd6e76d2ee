"""A tensor's memory stays while any view of it lives (docs/interop.md),
whatever happens to the Python object that made it: a NumPy view (numpy(),
np.asarray), a DLPack export, a Tensor view and a detached tensor each hold
a handle of their own.

Before the fix, ``t.__init__(...)`` again released the old handle while a
NumPy view only kept the Python object alive: the view then read memory
the library had reused (``[3e-45, 0]`` for ``[1.5, 2.5]``).
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import pylucid
from pylucid import ops


def _churn() -> None:
    # reuse any freed memory: many small results of the same size, dropped
    for k in range(200):
        ops.minimum(pylucid.tensor([float(k), 9.0]), np.float32([4.0, 4.0])).numpy()
    gc.collect()
    pylucid._collect()


@pytest.mark.parametrize("make_view", [
    lambda t: t.numpy(),
    lambda t: np.asarray(t),
    lambda t: t.__array__(),
    pytest.param(lambda t: np.from_dlpack(t), marks=pytest.mark.skipif(
        pylucid._runtime._hot is None, reason="DLPack needs the C extension")),
    lambda t: t.detach().numpy(),
], ids=["numpy", "asarray", "__array__", "from_dlpack", "detach"])
@pytest.mark.parametrize("values", [[1.5, 2.5], list(np.linspace(-3, 3, 1000))], ids=["small", "large"])
def test_a_view_keeps_the_memory_when_the_tensor_is_initialised_again(make_view, values) -> None:
    want = np.array(values, dtype=np.float32)
    t = pylucid.Tensor(values)
    v = make_view(t)
    t.__init__([0.0])
    assert t.numpy().tolist() == [0.0]
    _churn()
    np.testing.assert_array_equal(v, want)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "int64", "bool"])
def test_a_view_keeps_the_memory_when_the_tensor_is_dropped(dtype) -> None:
    t = pylucid.tensor([1, 0, 1, 1], dtype=dtype)
    want = t.numpy().copy()
    v = t.numpy()
    del t
    _churn()
    np.testing.assert_array_equal(v, want)
    assert v.dtype == want.dtype


def test_views_write_through_to_the_tensor_they_share_memory_with() -> None:
    # The view's own handle is a view of the same memory, not a copy.
    t = pylucid.tensor([1.0, 2.0, 3.0])
    v = t.numpy()
    v[1] = 7.0
    assert t.numpy().tolist() == [1.0, 7.0, 3.0]
    assert v.__array_interface__["data"][0] == t.data_ptr()


def test_a_view_releases_its_handle_with_the_array() -> None:
    t = pylucid.tensor(np.ones(1 << 16, np.float32))
    pylucid._collect()
    base = pylucid._stats()["handles"]
    views = [t.numpy() for _ in range(10)]
    assert pylucid._stats()["handles"] == base + 10
    del views
    gc.collect()
    assert pylucid._stats()["handles"] == base
