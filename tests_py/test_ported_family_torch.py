"""The min/max family (fmin, fmax, clamp/clip, amin, amax, argmin, argmax,
min/max with a dim, out=, Tensor methods, forward mode) against test cases
ported from PyTorch's own test suite (pytorch/pytorch). PyTorch need not be
installed: the inputs are re-created with NumPy, and the expected values come
from NumPy (the reference PyTorch's tests use), from the literal values the
upstream test states, or from pylucid's rule where pylucid deliberately
differs (references in ported_family_util.py).

Origins (each test names its own):
* test/test_reductions.py — the ReductionOpInfo tests run for amax/amin
  (test_dim_*, test_nan_policy_propagate, test_result_dtype,
  test_empty_tensor_*, test_noncontiguous_*, test_ref_*), test_max_with_inf,
  test_min_with_inf, _test_minmax_helper (test_max, test_min, test_amax,
  test_amin), test_argminmax_multiple, test_dim_reduction,
  test_dim_reduction_fns, test_argminmax_axis_with_dim_one,
  test_dim_arg_reduction_scalar, test_tensor_compare_ops_empty,
  test_tensor_compare_ops_argmax_argmix_kthvalue_dim_empty,
  test_minmax_illegal_dtype, test_amin_amax_some_dims, test_min_max_nan,
  test_repeated_dim, test_dim_reduction_lastdim;
* test/test_binary_ufuncs.py — the fmax/fmin parts of
  test_maximum_minimum_type_promotion, _int_and_bool, _float,
  _float_nan_and_inf, _complex, _forward_ad_float32 and
  test_maximum_and_minimum_subgradient;
* test/test_shape_ops.py — test_clamp, test_clamp_propagates_nans,
  test_clamp_raises_arg_errors;
* torch/testing/_internal/common_methods_invocations.py —
  sample_inputs_amax_amin, sample_inputs_argmax_argmin, sample_inputs_clamp
  (tensor bounds), sample_inputs_clamp_scalar, and the OpInfo gradcheck /
  gradgradcheck / forward-AD checks of those samples;
* tools/autograd/derivatives.yaml — the fmin/fmax, min.dim/max.dim and
  amax/amin formulas the gradient tests compare with;
* test/test_autograd.py — test_min_max_median_backprops_to_all_values.

Where pylucid agrees with PyTorch: fmin/fmax gradients (``self`` gets the
gradient iff ``self <= other`` or ``other`` is NaN — derivatives.yaml, the
same rule), and min/max with a dim (the gradient goes to the returned index,
the first winner).

Deliberate differences from PyTorch, asserted as pylucid's rule:
* amax/amin (and min/max without a dim) give the whole gradient to the
  first winner of each slice; PyTorch splits it evenly among the tied
  elements (scale_grad_by_count / evenly_distribute_backward);
* the errors are ValueError (or IndexError for a dim out of range) where
  PyTorch raises RuntimeError (repeated dims, clamp without bounds) or
  IndexError (a zero-size reduced slice); an out= of the wrong dtype raises
  ValueError/TypeError (PyTorch RuntimeError);
* a dim on a 0-d tensor behaves as it does for pylucid's sum (PyTorch
  accepts dim 0 and -1 there);
* ``clip_`` (in place) is not offered; ``clamp_`` is.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import optable as T
import pylucid
from ported_family_util import (ARGS, DIM_ERRORS, EXTREME, FMINMAX, MINMAX_DIM, NODE, OUT_ERRORS, REDUCTIONS,
                                a_wins, cast, check_clamp, check_clamp_grad, check_fminmax, check_fminmax_grad,
                                check_jvp_numeric, check_jvp_selects, check_out, check_out_refused,
                                check_reduction, check_reduction_grad, distinct, op, out_shape,
                                ref_arg, ref_clamp, ref_gather, rng_for, same_bits, same_values, to_numpy)
from pylucid import autograd, ops
from test_ported_torch import FLOATING, INTEGRAL_AND_BOOL, TORCH_DTYPES, make_tensor, torch_result_type

S, M = 5, 10  # PyTorch's OpInfo sizes
nan, inf = float("nan"), float("inf")


def reduced_shape(shape, dim=None, keepdim=False):
    """test_reductions.py _reduced_shape."""
    if dim is None:
        return tuple([1] * len(shape)) if keepdim else ()
    return out_shape(shape, dim, keepdim)


def like_sum(name, x, **kw):
    """A dim on a 0-d tensor: whatever pylucid's sum does (raise or accept)."""
    try:
        want = ops.sum(x, **kw).shape
    except DIM_ERRORS:
        with pytest.raises(DIM_ERRORS):
            op(name)(x, **kw)
        return None
    r = op(name)(x, **kw)
    assert r.shape == want
    return r


# ====================================================================== test_reductions.py: ReductionOpInfo tests


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("how", ["default", "none"])
@pytest.mark.parametrize("name", REDUCTIONS)
def test_dim_default_and_none(name, how, keepdim):
    """test_reductions.py test_dim_default / _keepdim / test_dim_none /
    _keepdim: no dim (or dim=None) reduces every dim; with keepdim the
    result has shape (1,)*ndim. ndim 0, 1, 2."""
    for ndim in range(3):
        shape = tuple(rng_for("dimdef", ndim).integers(2, 5, size=ndim))
        t = make_tensor(shape, "float32", rng_for("dimdef", name, ndim))
        kw = {"keepdim": keepdim} if how == "default" else {"dim": None, "keepdim": keepdim}
        assert op(name)(t, **kw).shape == reduced_shape(shape, None, keepdim)
        check_reduction(name, t, dim=None, keepdim=keepdim)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("ndim, dim", [(0, 0), (1, 0), (2, -1), (3, 1), (1, [0]), (3, [0, 2]), (4, [3, 0, 2]),
                                       (0, []), (2, [])],
                         ids=["0d-0", "1d-0", "2d-neg1", "3d-1", "1d-list0", "3d-list02", "4d-unsorted", "0d-empty",
                              "2d-empty"])
@pytest.mark.parametrize("name", REDUCTIONS)
def test_dim_single_multi_empty(name, ndim, dim, keepdim):
    """test_reductions.py test_dim_single / test_dim_multi /
    test_dim_multi_unsorted / test_dim_empty (and their _keepdim twins):
    dim=i reduces dim i, dim=[i, j, ...] those dims (unsorted too), dim=[]
    is a no-op (as NumPy's axis=()). Dim 0 of a 0-d tensor: as pylucid's
    sum (PyTorch accepts it)."""
    shape = tuple(rng_for("dimsingle", ndim).integers(2, 5, size=ndim))
    t = make_tensor(shape, "float32", rng_for("dimsingle", name, ndim, str(dim)))
    d = tuple(dim) if isinstance(dim, list) else dim
    if ndim == 0 and d == 0:
        like_sum(name, t, dim=0, keepdim=keepdim)
        return
    assert op(name)(t, dim=d, keepdim=keepdim).shape == reduced_shape(shape, d, keepdim)
    check_reduction(name, t, dim=d, keepdim=keepdim)
    check_reduction_grad(name, t, dim=d, keepdim=keepdim)


@pytest.mark.parametrize("dim", [(0, 1, 1, 2), (0, 0), (0, -3)], ids=["0112", "00", "0-3"])
@pytest.mark.parametrize("name", REDUCTIONS)
def test_dim_multi_duplicate_and_repeated_dim(name, dim):
    """test_reductions.py test_dim_multi_duplicate and test_repeated_dim
    (RuntimeError 'appears multiple times in the list of dims' there):
    ValueError/IndexError here."""
    t = np.zeros((3, 3, 3))
    with pytest.raises(DIM_ERRORS):
        op(name)(t, dim=dim)


@pytest.mark.parametrize("name", REDUCTIONS + ARGS)
def test_dim_offbounds(name):
    """test_reductions.py test_dim_offbounds: dim=2 of a 2-d tensor raises."""
    t = np.zeros((2, 3))
    for d in (2, -3):
        with pytest.raises(DIM_ERRORS):
            op(name)(t, dim=d)


@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_nan_policy_propagate(name, dtype):
    """test_reductions.py test_nan_policy_propagate (amax/amin have
    nan_policy='propagate'): make_tensor((5,)) with t[2] = nan reduces to NaN;
    the NaN is the winner: argmax finds it and the gradient goes to it."""
    t = make_tensor((5,), dtype, rng_for("nanprop", name, dtype))
    t[2] = np.nan
    assert np.isnan(to_numpy(check_reduction(name, t)).astype(np.float64))
    assert int(to_numpy(check_reduction("arg" + name[1:], t))) == 2
    g = check_reduction_grad(name, t, g=cast(np.array(3.0), dtype))
    assert g.astype(np.float64).tolist() == [0, 0, 3, 0, 0]


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
@pytest.mark.parametrize("name", REDUCTIONS + ARGS)
def test_result_dtype(name, dtype):
    """test_reductions.py test_result_dtype: amax/amin keep the input dtype;
    argmax/argmin (and the indices of max/min) are int64."""
    t = make_tensor((5,), dtype, rng_for("resdtype", name, dtype))
    r = check_reduction(name, t)
    assert r.dtype.name == (dtype if name in REDUCTIONS else "int64")
    v, i = op(EXTREME[name])(t, 0)
    assert v.dtype.name == dtype and i.dtype.name == "int64"


@pytest.mark.parametrize("name", REDUCTIONS + ARGS + MINMAX_DIM)
def test_empty_tensor_slices(name):
    """test_reductions.py test_empty_tensor_empty_slice (IndexError there:
    ValueError here) and test_empty_tensor_nonempty_slice: a (0, 2, 3) tensor
    reduced over dim 0 (or [0, 2]) has empty slices; over dim 1 (or [1, 2])
    it gives an empty result of the reduced shape."""
    t = np.zeros((0, 2, 3), dtype=np.float32)
    dims = [0, (0, 2)] if name in REDUCTIONS else [0]
    for d in dims:
        with pytest.raises(ValueError):
            op(name)(t, dim=d)
    for d in ([1, (1, 2)] if name in REDUCTIONS else [1, 2]):
        r = op(name)(t, dim=d)
        r = r.values if name in MINMAX_DIM else r
        assert r.shape == reduced_shape(t.shape, d)


NONCONTIG = {
    "innermost": (lambda rng, dt: make_tensor((10, 10), dt, rng, low=-1, high=1)[:, ::2], 1),
    "outermost": (lambda rng, dt: make_tensor((10, 10), dt, rng, low=-1, high=1)[::2, :], 0),
    "all": (lambda rng, dt: make_tensor((5, 5, 5), dt, rng, low=-1, high=1)[::2, ::3, 1:-1:2], None),
    "transposed": (lambda rng, dt: make_tensor((5, 5), dt, rng, low=-1, high=1).T, None),
    "negative_stride": (lambda rng, dt: make_tensor((6, 5), dt, rng, low=-1, high=1)[::-1, ::-2], 1),
    "expanded": (lambda rng, dt: np.broadcast_to(make_tensor((2, 3), dt, rng, low=-1, high=1)[:, None, :],
                                                 (2, 5, 3)), None),
}


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
@pytest.mark.parametrize("case", list(NONCONTIG))
@pytest.mark.parametrize("name", REDUCTIONS + ARGS)
def test_noncontiguous(name, case, dtype):
    """test_reductions.py test_noncontiguous_innermost / _outermost / _all /
    _transposed / _expanded, plus a negative-stride view: reducing a
    non-contiguous view (strided, transposed, flipped, zero-stride expanded)
    gives exactly the result of its contiguous copy. The data (make_tensor in [-1, 1]) is full of ties."""
    make, dim = NONCONTIG[case]
    x = make(rng_for("noncontig", name, case, dtype), dtype)
    assert not x.flags.c_contiguous
    r = check_reduction(name, x, dim=dim)
    same_bits(to_numpy(r), to_numpy(op(name)(np.ascontiguousarray(x), dim=dim)))
    r2 = op(name)(pylucid.from_numpy(x), dim=dim)
    same_bits(to_numpy(r2), to_numpy(r))


REF_DTYPES = ["float32", "float64", "int64", "int32", "float16", "bool", "uint8"]
REF_CASES = [(c, d) for c in ("scalar", "small", "duplicate", "extremal") for d in REF_DTYPES
             if c != "extremal" or d in FLOATING]


@pytest.mark.parametrize("case, dtype", REF_CASES, ids=["%s-%s" % cd for cd in REF_CASES])
@pytest.mark.parametrize("name", REDUCTIONS)
def test_ref(name, case, dtype):
    """test_reductions.py test_ref_scalar_input / test_ref_small_input /
    test_ref_duplicate_values / test_ref_extremal_values: against NumPy's
    np.amax/np.amin (the OpInfo ref): a 0-d tensor; (5, 3, 4, 2) in [-2, 2]
    without zeros over None, 0, 1, 3, [0, 2], [1, 3]; a (4, 4) tensor whose
    even block repeats the odd one; (5,) with t[2] in {0, 1, nan, inf, -inf}
    (floats)."""
    rng = rng_for("ref", name, case, dtype)
    if case == "scalar":
        check_reduction(name, make_tensor((), dtype, rng))
    elif case == "small":
        t = make_tensor((5, 3, 4, 2), dtype, rng, low=-2, high=2, exclude_zero=True)
        for d in (None, 0, 1, 3, (0, 2), (1, 3)):
            check_reduction(name, t, dim=d)
    elif case == "duplicate":
        t = make_tensor((4, 4), dtype, rng, low=-2, high=2, exclude_zero=True)
        t[::2, ::2] = t[1::2, 1::2]
        for d in (None, 0, 1):
            check_reduction(name, t, dim=d)
            if dtype in FLOATING:
                check_reduction_grad(name, t, dim=d)
    else:  # extremal values: floats (float32 and complex64 upstream)
        t = make_tensor((5,), dtype, rng, exclude_zero=True)
        for v in (0, 1, nan, inf, -inf):
            t[2] = v
            check_reduction(name, t)
            check_reduction_grad(name, t)


# ====================================================================== test_reductions.py: legacy tests


@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("extreme", ["max", "min"])
def test_max_min_with_inf(extreme, dtype):
    """test_reductions.py test_max_with_inf / test_min_with_inf: rows with
    +-inf reduce to inf (max) / -inf (min), with dim=1 and over all; the
    first infinite winner of each row is the index."""
    a = cast(np.array([[-inf, -inf, inf, 3], [inf, inf, -inf, -1]]), dtype)
    want = inf if extreme == "max" else -inf
    v, i = op(extreme)(a, dim=1)
    assert (to_numpy(v).astype(np.float64) == want).all()
    assert to_numpy(i).tolist() == ([2, 0] if extreme == "max" else [0, 2])
    assert (to_numpy(check_reduction("a" + extreme, a, dim=1)).astype(np.float64) == want).all()
    assert float(to_numpy(op(extreme)(a)).astype(np.float64)) == want
    assert float(to_numpy(check_reduction("a" + extreme, a)).astype(np.float64)) == want


def _minmax_input(shape, dtype, rng):
    """_test_minmax_helper's create_input: randn for floats, randint in
    [-1000, 1000) for integers, [0, 2) for bool."""
    if dtype in FLOATING:
        return cast(rng.standard_normal(shape), dtype)
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    return rng.integers(-1000, 1000, size=shape).astype(T.NP_OF[dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "bool", "float16", "bfloat16"])
@pytest.mark.parametrize("name", ["max", "min", "amax", "amin"])
def test_minmax_helper(name, dtype):
    """test_reductions.py _test_minmax_helper via test_max / test_min /
    test_amax / test_amin: a (100, 100) tensor and the non-contiguous
    x[:, 4] of a (10, 10, 10) one against np.amax/np.amin; (5, 5) and its
    transpose along dims 0 and 1 — the values are x at the returned indices;
    a NaN at index 0, 4 or 99 of a (100,) float tensor is the result, and
    its index."""
    rng = rng_for("minmax_helper", name, dtype)
    x = _minmax_input((100, 100), dtype, rng)
    check_reduction(name, x)
    x = _minmax_input((10, 10, 10), dtype, rng)[:, 4]
    check_reduction(name, x)
    size = 5
    x = _minmax_input((size, size), dtype, rng)
    for xinp, d in itertools.product((x, x.T), (0, 1)):
        r = check_reduction(name, xinp, dim=d)
        if name in MINMAX_DIM:
            v, i = to_numpy(r.values), to_numpy(r.indices)
            picked = xinp[np.arange(size), i] if d == 1 else xinp[i, np.arange(size)]
            same_bits(v, picked)
    if dtype in FLOATING:
        for index in (0, 4, 99):
            x = _minmax_input((100,), dtype, rng)
            x[index] = np.nan
            r = op(name)(x, 0)
            v = r.values if name in MINMAX_DIM else r
            assert np.isnan(to_numpy(v).astype(np.float64))
            if name in MINMAX_DIM:
                assert int(to_numpy(r.indices)) == index
            assert np.isnan(to_numpy(op(name)(x)).astype(np.float64))


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
                                   "float64"])
def test_argminmax_multiple(dtype):
    """test_reductions.py test_argminmax_multiple: all ones (3, 3) -> 0; a NaN
    at [2, 2] -> 8 for both; random tensors of 1..4 dims (with extremal
    values, some set to max+1 / min-1 so there are ties), contiguous and
    transposed, against np.argmax/np.argmin, and max/min's indices along a
    dim; the samples of gh-41998 along dim 1."""
    t = np.ones((3, 3), dtype=T.NP_OF[dtype])
    for name in ARGS:
        assert int(to_numpy(check_reduction(name, t))) == 0
    if dtype in FLOATING:
        t[2, 2] = np.nan
        for name in ARGS:
            assert int(to_numpy(check_reduction(name, t))) == 8
    rng = rng_for("argminmax_multiple", dtype)
    for ndims in range(1, 5):
        shape = tuple(rng.integers(5, 11, size=ndims))
        for with_extremal, contiguous in itertools.product((False, True), (False, True)):
            x = make_tensor(shape, dtype, rng, low=-50 if dtype != "uint8" else 1, high=50)
            if with_extremal and dtype in FLOATING:
                for v in (np.nan, np.inf, -np.inf):
                    x[rng.standard_normal(shape) > 0.5] = v
            with np.errstate(invalid="ignore"):
                big = np.nanmax(x.astype(np.float64)) if x.size else 0
                small = np.nanmin(x.astype(np.float64)) if x.size else 0
            if np.isfinite(big) and dtype != "uint8":
                x[rng.standard_normal(shape) > 0.5] = cast(np.array(big + 1), dtype)
            if np.isfinite(small) and dtype != "uint8":
                x[rng.standard_normal(shape) > 0.5] = cast(np.array(small - 1), dtype)
            if not contiguous:
                x = x.T
            for name in ARGS:
                check_reduction(name, x)
            d = int(rng.integers(0, ndims))
            check_reduction("max", x, dim=d)
            check_reduction("min", x, dim=d)
    for rows in ([[1, 5], [2, 10], [3, 3]], [[1, 5], [2, 10], [0, 0]]):
        t = cast(np.array(rows), dtype)
        for x in (t, t.T):
            for name in ARGS + MINMAX_DIM:
                check_reduction(name, x, dim=1)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"])
def test_dim_reduction(dtype):
    """test_reductions.py test_dim_reduction: example [[-1, 2, 1], [5, 3, 6]]
    with the literal expectations of min/amin/argmin/max/amax/argmax over
    all, dim 0 and dim 1, with and without keepdim, the Tensor methods, and
    the non-contiguous x[:, :2]."""
    x = cast(np.array([[-1, 2, 1], [5, 3, 6]]), dtype)
    t = pylucid.tensor(x)
    assert to_numpy(t.min()).tolist() == -1 and to_numpy(t.argmin()).tolist() == 0
    assert to_numpy(t.argmin(dim=None)).tolist() == 0
    exp = {
        ("min", 0): ([-1, 2, 1], [0, 0, 0]), ("min", 1): ([-1, 3], [0, 1]),
        ("max", 0): ([5, 3, 6], [1, 1, 1]), ("max", 1): ([2, 6], [1, 2]),
    }
    for (ext, d), (vals, idx) in exp.items():
        for keepdim in (False, True):
            v, i = getattr(t, ext)(d, keepdim=keepdim)
            a = getattr(t, "a" + ext)(dim=d, keepdim=keepdim)
            ai = getattr(t, "arg" + ext)(dim=d, keepdim=keepdim)
            want_v = np.array(vals, dtype=np.float64)
            want_i = np.array(idx)
            if keepdim:
                want_v, want_i = np.expand_dims(want_v, d), np.expand_dims(want_i, d)
            for got in (v, a):
                assert np.array_equal(to_numpy(got).astype(np.float64), want_v)
                assert got.dtype.name == dtype
            for got in (i, ai):
                assert np.array_equal(to_numpy(got), want_i) and got.dtype is pylucid.int64
            check_reduction(ext, x, dim=d, keepdim=keepdim)
    assert to_numpy(t.max()).tolist() == 6 and to_numpy(t.amax()).tolist() == 6
    assert to_numpy(t.argmax()).tolist() == 5
    xs = x[:, :2]
    assert to_numpy(ops.min(xs)).tolist() == -1 and to_numpy(ops.amin(xs)).tolist() == -1
    assert to_numpy(ops.argmin(xs)).tolist() == 0
    assert to_numpy(ops.max(xs)).tolist() == 5 and to_numpy(ops.amax(xs)).tolist() == 5
    assert to_numpy(ops.argmax(xs)).tolist() == 2


@pytest.mark.parametrize("name", ["max", "min", "amax", "amin"])
def test_dim_reduction_fns(name):
    """test_reductions.py test_dim_reduction_fns for max, min, amax, amin:
    fn(x, dim) with keepdim equals the result with the dim re-inserted; a
    (1,) tensor reduces to () (keepdim: (1,)); reducing a singleton dim;
    out= into a non-contiguous column (out=(values[:, 1], indices[:, 1])
    for max/min) holds the result."""
    rng = rng_for("dim_reduction_fns", name)

    def fn(x, dim, keepdim=False, **kw):
        r = op(name)(x, dim, keepdim=keepdim, **kw)
        return r.values if name in MINMAX_DIM and "out" not in kw else r

    x = rng.standard_normal((3, 4, 5))
    for dim in range(3):
        same_bits(np.expand_dims(to_numpy(fn(x, dim)), dim), to_numpy(fn(x, dim, keepdim=True)))
        assert fn(x, dim).ndim == 2 and fn(x, dim, keepdim=True).ndim == 3
    x = rng.standard_normal(1)
    assert fn(x, 0).shape == () and fn(x, 0, keepdim=True).shape == (1,)
    for singleton in range(3):
        dims = [3, 4, 5]
        dims[singleton] = 1
        x = rng.standard_normal(dims)
        same_bits(np.expand_dims(to_numpy(fn(x, singleton)), singleton), to_numpy(fn(x, singleton, keepdim=True)))
        same_bits(to_numpy(fn(x, singleton)), x.reshape(fn(x, singleton).shape))
    y = rng.standard_normal((5, 3))
    if name in MINMAX_DIM:
        values = rng.standard_normal((5, 3))
        indices = np.zeros((5, 3), dtype=np.int64) - 1
        out = (values[:, 1], indices[:, 1])
        r = op(name)(y, 1, keepdim=False, out=out)
        assert r[0] is out[0] and r[1] is out[1]
        ve, ie = op(name)(y, 1, keepdim=False)
        same_bits(values[:, 1], to_numpy(ve))
        assert np.array_equal(indices[:, 1], to_numpy(ie))
        assert (indices[:, [0, 2]] == -1).all()
    else:
        x = rng.standard_normal((5, 3))
        before = x.copy()
        col = x[:, 1]
        assert op(name)(y, 1, keepdim=False, out=col) is col
        same_bits(x[:, 1], to_numpy(op(name)(y, 1)))
        same_bits(x[:, [0, 2]], before[:, [0, 2]])


def test_argminmax_axis_with_dim_one():
    """test_reductions.py test_argminmax_axis_with_dim_one (gh-38922): argmax/
    argmin of zeros((1, 32768)) along dim 0 / -2 are zeros, with keepdim
    shape (1, n)."""
    n = 32768
    x = np.zeros((1, n), dtype=np.float32)
    for name in ARGS:
        for d in (0, -2):
            r = op(name)(x, dim=d)
            assert r.shape == (n,) and not to_numpy(r).any() and r.dtype is pylucid.int64
            r = op(name)(x, dim=d, keepdim=True)
            assert r.shape == (1, n) and not to_numpy(r).any()


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_dim_arg_reduction_scalar(dtype):
    """test_reductions.py test_dim_arg_reduction_scalar: argmax/argmin of a
    0-d tensor (4.0) is 0, also with dim=None; with dim=0 (and keepdim)
    PyTorch gives 0 — pylucid treats a dim of a 0-d tensor as its sum does."""
    x = pylucid.tensor(cast(np.array(4.0 if dtype != "bool" else 1), dtype))
    for name in ARGS:
        assert to_numpy(getattr(x, name)()).tolist() == 0
        assert to_numpy(op(name)(x, dim=None)).tolist() == 0
        assert op(name)(x, dim=None, keepdim=True).shape == ()
        for keepdim in (False, True):
            r = like_sum(name, x, dim=0, keepdim=keepdim)
            if r is not None:
                assert to_numpy(r).tolist() == 0


@pytest.mark.parametrize("name", REDUCTIONS + MINMAX_DIM + ARGS)
def test_tensor_compare_ops_empty(name):
    """test_reductions.py test_tensor_compare_ops_empty (amax, amin, max, min)
    and test_tensor_compare_ops_argmax_argmix_kthvalue_dim_empty (argmax,
    argmin): a (2, 0, 4) tensor reduced over dim 2 / -1 gives an empty (2, 0)
    result ((2, 0, 1) with keepdim), as np.amax; over the zero-size dim 1 it
    raises ('Expected reduction dim', IndexError there: ValueError here);
    argmax/argmin without a dim raise too."""
    x = rng_for("compare_empty").standard_normal((2, 0, 4))
    for d in (2, -1):
        for keepdim in (False, True):
            r = op(name)(x, dim=d, keepdim=keepdim)
            r = r.values if name in MINMAX_DIM else r
            assert r.shape == ((2, 0, 1) if keepdim else (2, 0))
            if not keepdim and name in REDUCTIONS:
                assert r.shape == np.amax(x, axis=d).shape
    with pytest.raises(ValueError):
        op(name)(x, dim=1)
    if name in ARGS or name in REDUCTIONS:
        with pytest.raises(ValueError):
            op(name)(x)


def test_minmax_illegal_dtype():
    """test_reductions.py test_minmax_illegal_dtype: out=(values, indices)
    for max/min and out=values for amax/amin work with float32 values and
    int64 indices; an int32 values or float64 indices out raises (PyTorch:
    RuntimeError 'scalar type|dtype') and is left untouched."""
    x = rng_for("illegal").standard_normal((5, 5)).astype(np.float32)
    valid_values = np.empty(5, dtype=np.float32)
    valid_indices = np.empty(5, dtype=np.int64)
    illegal_values = np.zeros(5, dtype=np.int32)
    illegal_indices = np.zeros(5, dtype=np.float64)
    for ext in ("max", "min"):
        assert op(ext)(x, dim=0, out=(valid_values, valid_indices)) is not None
        v, i = op(ext)(x, dim=0)
        same_bits(valid_values, to_numpy(v))
        assert np.array_equal(valid_indices, to_numpy(i))
        assert op("a" + ext)(x, dim=0, out=valid_values) is valid_values
        for outs in ((illegal_values, valid_indices), (valid_values, illegal_indices),
                     (illegal_values, illegal_indices)):
            before = [o.copy() for o in outs]
            with pytest.raises(OUT_ERRORS):
                op(ext)(x, dim=0, out=outs)
            for o, b in zip(outs, before):
                same_bits(o, b)
        check_out_refused(op("a" + ext), (x,), {"dim": 0}, illegal_values)


DIM_COMBOS = [c for r in range(2, 5) for c in itertools.combinations(range(5), r)]


@pytest.mark.parametrize("dim", DIM_COMBOS, ids=["".join(map(str, c)) for c in DIM_COMBOS])
def test_amin_amax_some_dims(dim):
    """test_reductions.py test_amin_amax_some_dims: over a tuple of dims of a
    (4, 6, 7, 5, 3) tensor (torch.rand), amin/amax equal reducing the dims
    one at a time (bit for bit: a selection), with and without keepdim; the
    gradient goes to one element per slice."""
    x = rng_for("some_dims").random((4, 6, 7, 5, 3)).astype(np.float32)
    for keepdim in (False, True):
        for name in REDUCTIONS:
            r1 = to_numpy(check_reduction(name, x, dim=dim, keepdim=keepdim))
            r2 = x
            for i, d in enumerate(dim):
                if not keepdim:
                    d -= i
                r2 = to_numpy(op(name)(r2, dim=d, keepdim=keepdim))
            same_bits(r1, r2)
    check_reduction_grad("amax", x, dim=dim)


@pytest.mark.parametrize("case", ["min", "max", "amin", "amax", "min_dim", "max_dim", "amin_dim", "amax_dim"])
def test_min_max_nan(case):
    """test_reductions.py test_min_max_nan (CUDA against CPU there): arange(25)
    as (5, 5) with a[2, 2] = nan; reductions over all are NaN; along dim 0
    only column 2 is NaN, the rest are row 0 (min) / row 4 (max)."""
    a = np.arange(25.0).reshape(5, 5)
    a[2, 2] = np.nan
    name, _, dim = case.partition("_")
    if not dim:
        assert np.isnan(to_numpy(op(name)(a)))
        return
    r = op(name)(a, 0)
    v = to_numpy(r.values if name in MINMAX_DIM else r)
    want = a[0] if name.endswith("min") else a[4]
    want = want.copy()
    want[2] = np.nan
    same_bits(v, want)
    if name in MINMAX_DIM:
        assert to_numpy(r.indices).tolist() == [0 if name == "min" else 4] * 2 + [2] + [0 if name == "min" else 4] * 2


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_dim_reduction_lastdim(dtype):
    """test_reductions.py test_dim_reduction_lastdim: argmax/argmin over the
    last dim of the strided x[:, :, 0:40:2] of a (3, 5, 40) tensor equal those
    of its contiguous copy."""
    x = cast(rng_for("lastdim", dtype).standard_normal((3, 5, 40)), dtype)[:, :, 0:40:2]
    x2 = np.ascontiguousarray(x)
    for name in ARGS:
        assert np.array_equal(to_numpy(check_reduction(name, x, dim=-1)), to_numpy(op(name)(x2, dim=-1)))


# ====================================================================== test_binary_ufuncs.py (fmax / fmin)


@pytest.mark.parametrize("db", TORCH_DTYPES)
@pytest.mark.parametrize("da", TORCH_DTYPES)
@pytest.mark.parametrize("name", FMINMAX)
def test_fmax_fmin_type_promotion(name, da, db):
    """test_binary_ufuncs.py test_maximum_minimum_type_promotion (torch.fmax,
    torch.fmin): a=(0, 1), b=(1, 0) of every dtype pair: the result dtype is
    torch.result_type(a, b) and the values NumPy's fmin/fmax."""
    a = cast(np.array([0, 1]), da)
    b = cast(np.array([1, 0]), db)
    y = op(name)(a, b)
    assert y.dtype.name == torch_result_type(da, db)
    got = check_fminmax(name, a, b)
    assert got.astype(np.float64).tolist() == ([0, 0] if name == "fmin" else [1, 1])


@pytest.mark.parametrize("dtype", INTEGRAL_AND_BOOL)
@pytest.mark.parametrize("name", FMINMAX)
def test_fmax_fmin_int_and_bool(name, dtype):
    """test_binary_ufuncs.py test_maximum_minimum_int_and_bool (fmax, fmin):
    random integers in [-100, 100) as the dtype, against np.fmax/np.fmin,
    also with out= (torch.empty_like(a))."""
    rng = rng_for("fint", name, dtype)
    a_np = np.array(rng.integers(-100, 100, size=10)).astype(T.NP_OF[dtype])
    b_np = np.array(rng.integers(-100, 100, size=10)).astype(T.NP_OF[dtype])
    got = check_fminmax(name, a_np, b_np)
    assert np.array_equal(got, getattr(np, name)(a_np, b_np))
    check_out(op(name), (a_np, b_np), {}, got, as_tensor=True)


@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("name", FMINMAX)
def test_fmax_fmin_float(name, dtype):
    """test_binary_ufuncs.py test_maximum_minimum_float (fmax, fmin): randn(10)
    against NumPy (exact: rounding is monotonic), out= too; gradients by
    derivatives.yaml's fmin/fmax formula — pylucid's rule."""
    rng = rng_for("ffloat", name, dtype)
    a64, b64 = rng.standard_normal(10), rng.standard_normal(10)
    a_np, b_np = cast(a64, dtype), cast(b64, dtype)
    got = check_fminmax(name, a_np, b_np)
    same_values(got, cast(getattr(np, name)(a64, b64), dtype))
    check_out(op(name), (a_np, b_np), {}, got, as_tensor=True)
    check_fminmax_grad(name, a_np, b_np)


NAN_INF_A = (inf, -inf, nan, inf, nan, nan, 1, nan)
NAN_INF_B = (-inf, inf, inf, nan, nan, 0, nan, -5)


@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("name", FMINMAX)
def test_fmax_fmin_float_nan_and_inf(name, dtype):
    """test_binary_ufuncs.py test_maximum_minimum_float_nan_and_inf (fmax,
    fmin): NaN is ignored unless both are NaN. derivatives.yaml: self gets
    the gradient iff self <= other (fmax >=) or other is NaN — exactly
    pylucid's rule, so this is PyTorch's gradient too."""
    a_np = cast(np.array(NAN_INF_A), dtype)
    b_np = cast(np.array(NAN_INF_B), dtype)
    got = check_fminmax(name, a_np, b_np)
    same_values(got, cast(getattr(np, name)(np.array(NAN_INF_A), np.array(NAN_INF_B)), dtype))
    check_out(op(name), (a_np, b_np), {}, got, as_tensor=True)
    ga, gb = check_fminmax_grad(name, a_np, b_np, g=cast(np.ones(8), dtype))
    A, B = np.array(NAN_INF_A), np.array(NAN_INF_B)
    with np.errstate(invalid="ignore"):
        torch_self = ((A <= B) if name == "fmin" else (A >= B)) | np.isnan(B)
    assert np.array_equal(ga.astype(np.float64), torch_self.astype(np.float64))
    assert np.array_equal(gb.astype(np.float64), (~torch_self).astype(np.float64))


@pytest.mark.parametrize("other", TORCH_DTYPES + ["complex64", "complex128"])
@pytest.mark.parametrize("cplx", ["complex64", "complex128"])
def test_fmax_fmin_complex(cplx, other):
    """test_binary_ufuncs.py test_maximum_minimum_complex (fmax, fmin): a
    complex operand, either side, raises TypeError naming it (PyTorch:
    RuntimeError 'not implemented for')."""
    c = np.ones(1, dtype=cplx)
    o = np.ones(1, dtype=T.NP_OF[other]) if other in T.NP_OF else np.ones(1, dtype=other)
    for name in FMINMAX:
        for args in ((c, o), (o, c)):
            with pytest.raises(TypeError, match="complex"):
                op(name)(*args)


@pytest.mark.parametrize("db", FLOATING)
@pytest.mark.parametrize("da", FLOATING)
@pytest.mark.parametrize("name", FMINMAX)
def test_fmax_fmin_subgradient(name, da, db):
    """test_binary_ufuncs.py test_maximum_and_minimum_subgradient, for fmax and
    fmin: a=[0, 1, 2], b=[1, 1, 1], z.sum().backward(). PyTorch's fmin/fmax
    (unlike its minimum/maximum) give the tie to self; so does pylucid.
    Gradients in each input's dtype."""
    a = pylucid.tensor(np.array([0.0, 1.0, 2.0]), dtype=T.PL_OF[da], requires_grad=True)
    b = pylucid.tensor(np.array([1.0, 1.0, 1.0]), dtype=T.PL_OF[db], requires_grad=True)
    z = op(name)(a, b)
    assert z.dtype.name == torch_result_type(da, db)
    assert z.grad_fn.name() == NODE[name]
    z.sum().backward()
    assert a.grad.dtype.name == da and b.grad.dtype.name == db
    want_a = [0.0, 1.0, 1.0] if name == "fmax" else [1.0, 1.0, 0.0]
    assert to_numpy(a.grad).astype(np.float64).tolist() == want_a
    assert to_numpy(b.grad).astype(np.float64).tolist() == [1.0 - w for w in want_a]


@pytest.mark.parametrize("name", FMINMAX + ["minimum", "maximum"])
def test_fmax_fmin_forward_ad_float32(name):
    """test_binary_ufuncs.py test_maximum_minimum_forward_ad_float32, with
    fmax/fmin added: float32 x, y (some ties, some NaN) with tangents tx, ty
    through autograd.jvp. pylucid's tangent is the winner's tangent bit for
    bit: where(a wins, tx, ty) — PyTorch's maximum gives where(x > y, tx, ty)
    (at a tie its jvp averages), its fmin other_t + mask * (self_t - other_t)
    (the same values up to rounding)."""
    rng = rng_for("fwad_fam", name)
    x = rng.standard_normal(64).astype(np.float32)
    y = rng.standard_normal(64).astype(np.float32)
    y[::4] = x[::4]
    x[1::8] = np.nan
    y[2::8] = np.nan
    tx = rng.standard_normal(64).astype(np.float32)
    ty = rng.standard_normal(64).astype(np.float32)
    if name in FMINMAX:
        w = a_wins(name, x, y)
    else:
        w = (T.a_wins_min if name == "minimum" else T.a_wins_max)(x, y)
    check_jvp_selects(op(name), [x, y], [tx, ty], np.where(w, tx, ty))
    if name in FMINMAX:
        torch_tangent = ty + w.astype(np.float32) * (tx - ty)
        np.testing.assert_allclose(np.where(w, tx, ty), torch_tangent, rtol=1e-6, atol=1e-6)


# ====================================================================== test_shape_ops.py: clamp


def clamp_baseline(dtype, rng, with_nans=False):
    """test_shape_ops.py generate_clamp_baseline: rand(100) * 50 - 25 as the
    dtype (integers truncate, as X.to(int64)), NaN at random positions."""
    x = rng.random(100) * 50 - 25
    if with_nans:
        x[rng.integers(0, 2, size=100).astype(bool)] = np.nan
    if dtype in FLOATING:
        return cast(x, dtype)
    return np.trunc(x).astype(T.NP_OF[dtype])


CLAMP_ARGS = [(-10, 10), (-10, None), (None, 10)]
CLAMP_FORMS = ["clamp", "Tensor.clamp", "Tensor.clamp_", "clip", "Tensor.clip"]


def _clamp_form(form, x, lo, hi):
    if form in ("clamp", "clip"):
        return op(form)(x, lo, hi)
    t = pylucid.tensor(x)
    r = getattr(t, form.split(".")[1])(lo, hi)
    if form == "Tensor.clamp_":
        assert r is t
    return r


@pytest.mark.parametrize("form", CLAMP_FORMS)
@pytest.mark.parametrize("lo, hi", CLAMP_ARGS, ids=["both", "min", "max"])
@pytest.mark.parametrize("dtype", ["int64", "float32", "float16"])
def test_clamp(dtype, lo, hi, form):
    """test_shape_ops.py test_clamp: clamp, Tensor.clamp, Tensor.clamp_, clip,
    Tensor.clip with min/max in {-10, None} x {10, None} against np.clip;
    out= for the functions. clamp_ clamps in place and returns the tensor."""
    rng = rng_for("clamp", dtype, lo, hi, form)
    x = clamp_baseline(dtype, rng)
    expected = np.clip(x, lo, hi)
    got = to_numpy(_clamp_form(form, x, lo, hi))
    assert np.array_equal(got.astype(np.float64), expected.astype(np.float64))
    check_clamp(x, lo, hi)
    if form in ("clamp", "clip"):
        out = np.empty_like(x)
        assert op(form)(x, min=lo, max=hi, out=out) is out
        same_bits(out, got)


@pytest.mark.parametrize("form", CLAMP_FORMS)
@pytest.mark.parametrize("lo, hi", CLAMP_ARGS, ids=["both", "min", "max"])
def test_clamp_propagates_nans(lo, hi, form):
    """test_shape_ops.py test_clamp_propagates_nans: float32 with NaN at
    random positions: NaN exactly where np.clip has NaN (out= too)."""
    rng = rng_for("clamp_nans", lo, hi, form)
    x = clamp_baseline("float32", rng, with_nans=True)
    want = np.isnan(np.clip(x, lo, hi))
    got = to_numpy(_clamp_form(form, x, lo, hi))
    assert np.array_equal(np.isnan(got), want)
    check_clamp(x, lo, hi)
    if form in ("clamp", "clip"):
        out = np.empty_like(x)
        op(form)(x, lo, hi, out=out)
        assert np.array_equal(np.isnan(out), want)


def test_clamp_raises_arg_errors():
    """test_shape_ops.py test_clamp_raises_arg_errors: "At least one of 'min'
    or 'max' must not be None" (RuntimeError there, ValueError here) for
    X.clamp(), X.clamp_() and clamp(X)."""
    x = rng_for("clamp_err").standard_normal(100).astype(np.float32)
    t = pylucid.tensor(x)
    with pytest.raises(ValueError):
        t.clamp()
    with pytest.raises(ValueError):
        t.clamp_()
    with pytest.raises(ValueError):
        ops.clamp(x)
    with pytest.raises(ValueError):
        ops.clamp(x, None, None)
    same_bits(to_numpy(t), x)


# ====================================================================== common_methods_invocations.py


def _bounds_samples(dtype, rng):
    """sample_inputs_clamp (tensor bounds): shape (S, M, S) with bounds of the
    same shape, of shape[1:], a (S, 1, S) min only, (None, max), (min, None),
    and int32 bounds (type promotion)."""
    shape = (S, M, S)
    mk = lambda s, dt=dtype: make_tensor(s, dt, rng)  # noqa: E731
    yield mk(shape), mk(shape), mk(shape)
    yield mk(shape), mk(shape[1:]), mk(shape[1:])
    yield mk(shape), mk((S, 1, S)), None
    yield mk(shape), None, mk(shape)
    yield mk(shape), mk(shape), None
    yield mk(shape), mk(shape, "int32"), None
    yield mk(shape), mk(shape), mk(shape, "int32")


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_sample_inputs_clamp(dtype):
    """common_methods_invocations.py sample_inputs_clamp: tensor bounds that
    broadcast, one bound None, int32 bounds promoting; random bounds give
    min > max in many places (then max wins). Values against np.clip and
    bit for bit the composition; float gradients to x and both bounds."""
    rng = rng_for("sample_clamp", dtype)
    for x, lo, hi in _bounds_samples(dtype, rng):
        check_clamp(x, lo, hi)
        if dtype in FLOATING and all(v is None or v.dtype == x.dtype for v in (lo, hi)):
            check_clamp_grad(x, lo, hi)


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_sample_inputs_clamp_scalar(dtype):
    """common_methods_invocations.py sample_inputs_clamp_scalar: (2, 3, 2) and
    (2, 0, 3) with (0, 1) and (-1, 1) ((2, 5), (3, 7) for uint8), (0.5, None),
    (None, 0.5), a 0-d tensor with (0.0, 1.0); plus min > max, (1, 0)."""
    rng = rng_for("sample_clamp_scalar", dtype)
    tensors = [make_tensor((2, 3, 2), dtype, rng), make_tensor((2, 0, 3), dtype, rng)]
    vals = [(2, 5), (3, 7)] if dtype == "uint8" else [(0, 1), (-1, 1)]
    for t, (lo, hi) in itertools.product(tensors, vals):
        check_clamp(t, lo, hi)
    for lo, hi in ((0.5, None), (None, 0.5), (1, 0) if dtype != "bool" else (True, False)):
        check_clamp(tensors[0], lo, hi)
    check_clamp(make_tensor((), dtype, rng), 0.0, 1.0)
    if dtype in FLOATING:
        check_clamp_grad(tensors[0], 0.5, None)
        check_clamp_grad(tensors[0], 1, 0)


AMAX_SAMPLES = [((S, S, S), {}), ((S, S, S), {"dim": 1}), ((S, S, S), {"dim": (1, 2)}),
                ((S, S, S), {"dim": 1, "keepdim": True}), ((), {"dim": 0}), ((), {}), ((), {"dim": 0, "keepdim": True}),
                ((S, 0, S), {"dim": 0})]
ARG_SAMPLES = [((2, 2, 2), {}), ((2, 2, 2), {"dim": 0}), ((2, 2, 2), {"dim": 1}), ((2, 2, 2), {"dim": 2}),
               ((2, 2, 2), {"dim": 2, "keepdim": True}), ((2, 2, 2), {"dim": None}), ((), {"dim": 0}), ((), {}),
               ((), {"dim": None, "keepdim": True}), ((1,), {}), ((1,), {"dim": 0}),
               ((1,), {"dim": 0, "keepdim": True}),
               ((2,), {"keepdim": True}), ((2, 2, 2), {"dim": 1, "keepdim": True})]


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_sample_inputs_amax_amin(name, dtype):
    """common_methods_invocations.py sample_inputs_amax_amin, plus a (S, 0, S)
    tensor over dim 0 (slices of size S, an empty (0, S) result): against
    np.amax/np.amin, the Tensor method, and the gradient for floats. Dim 0
    of a 0-d tensor behaves as pylucid's sum."""
    rng = rng_for("amax_samples", name, dtype)
    for shape, kw in AMAX_SAMPLES:
        x = make_tensor(shape, dtype, rng)
        if shape == () and "dim" in kw:
            like_sum(name, x, **kw)
            continue
        check_reduction(name, x, **kw)
        same_bits(to_numpy(getattr(pylucid.tensor(x), name)(**kw)), to_numpy(op(name)(x, **kw)))
        if dtype in FLOATING and x.size:
            check_reduction_grad(name, x, **kw)


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
@pytest.mark.parametrize("name", ARGS)
def test_sample_inputs_argmax_argmin(name, dtype):
    """common_methods_invocations.py sample_inputs_argmax_argmin: against
    np.argmax/np.argmin (keepdim with dim None: shape (1,)*ndim), and the
    Tensor method; never requires grad, even for an input that does."""
    rng = rng_for("arg_samples", name, dtype)
    for shape, kw in ARG_SAMPLES:
        x = make_tensor(shape, dtype, rng)
        if shape == () and kw.get("dim") == 0:
            like_sum(name, x, **kw)
            continue
        check_reduction(name, x, **kw)
        same_bits(to_numpy(getattr(pylucid.tensor(x), name)(**kw)), to_numpy(op(name)(x, **kw)))
        if dtype in FLOATING:
            t = pylucid.tensor(x, requires_grad=True)
            r = op(name)(t, **kw)
            assert not r.requires_grad and r.grad_fn is None


GRAD_CASES = {
    "amax": lambda x: ops.amax(x, dim=1),
    "amin": lambda x: ops.amin(x, dim=(0, 2), keepdim=True),
    "amax_all": lambda x: ops.amax(x),
    "max_dim": lambda x: ops.max(x, 1).values,
    "min_dim": lambda x: ops.min(x, -1, keepdim=True).values,
    "max_method": lambda x: x.max(0).values,
    "clamp_scalars": lambda x: ops.clamp(x, -0.3, 0.4),
    "clip_max_only": lambda x: ops.clip(x, None, 0.1),
}


@pytest.mark.parametrize("case", list(GRAD_CASES))
def test_opinfo_gradcheck_gradgradcheck(case):
    """common_methods_invocations.py OpInfo entries amax/amin/max
    (reduction_with_dim)/min/clamp/clip with supports_gradgrad: test_ops.py's
    test_fn_grad / test_fn_gradgrad, i.e. gradcheck and gradgradcheck in
    float64 on tie-free samples (smaller than OpInfo's (S, S, S), to keep
    the finite differences fast)."""
    x = pylucid.from_numpy(distinct((3, 4, 2), case) / 8.0, requires_grad=True)
    fn = GRAD_CASES[case]
    assert autograd.gradcheck(fn, [x])
    assert autograd.gradgradcheck(fn, [x])


@pytest.mark.parametrize("name", FMINMAX)
def test_opinfo_gradcheck_fmin_fmax(name):
    """OpInfo fmin/fmax (binary ufuncs with supports_gradgrad): gradcheck and
    gradgradcheck of both operands in float64, tie-free, with broadcasting."""
    a = distinct((3, 4), name, "a")
    b = distinct((4,), name, "b") + 1.0 / 32  # off the grid of a: no ties
    ta = pylucid.from_numpy(a, requires_grad=True)
    tb = pylucid.from_numpy(b, requires_grad=True)
    assert autograd.gradcheck(op(name), [ta, tb])
    assert autograd.gradgradcheck(op(name), [ta, tb])


def test_opinfo_gradcheck_clamp_tensor_bounds():
    """OpInfo clamp with tensor bounds (sample_inputs_clamp): gradcheck and
    gradgradcheck to x, min and max in float64 (no element at a bound)."""
    x = distinct((4, 3), "clamp x")
    lo = distinct((3,), "clamp lo") - 2.0 + 1.0 / 32
    hi = distinct((4, 1), "clamp hi") + 2.0 + 1.0 / 64
    ts = [pylucid.from_numpy(v, requires_grad=True) for v in (x, lo, hi)]
    assert autograd.gradcheck(ops.clamp, ts)
    assert autograd.gradgradcheck(ops.clamp, ts)


JVP_CASES = {
    "fmin": (lambda a, b: ops.fmin(a, b), 2),
    "fmax": (lambda a, b: ops.fmax(a, b), 2),
    "clamp": (lambda x, lo, hi: ops.clamp(x, lo, hi), 3),
    "amax": (lambda x: ops.amax(x, dim=(0, 2)), 1),
    "amin": (lambda x: ops.amin(x, dim=-1, keepdim=True), 1),
    "max_dim": (lambda x: ops.max(x, 1).values, 1),
    "min_dim": (lambda x: ops.min(x, 0, keepdim=True).values, 1),
}


@pytest.mark.parametrize("case", list(JVP_CASES))
def test_opinfo_forward_ad(case):
    """test_ops.py TestFwdGradients.test_forward_mode_AD (supports_forward_ad
    on these OpInfos): autograd.jvp against finite differences and against
    the vjp (<J v, u> == <v, Jᵀ u>), float64, tie-free; the tangent is the
    winner's tangent bit for bit (derivatives.yaml's
    gather_with_keepdimed_indices for min.dim/max.dim)."""
    fn, n = JVP_CASES[case]
    shapes = [(S, 4, 3)] * n if n != 2 else [(S, 4, 3), (4, 3)]
    if n == 3:
        shapes = [(S, 4, 3), (3,), (4, 1)]
    primals = [distinct(s, case, i) / (8.0 if i == 0 else 4.0) + (i / 64.0) for i, s in enumerate(shapes)]
    if n == 3:
        primals[1] -= 1.0
        primals[2] += 1.0
    tangents = [rng_for("tangent", case, i).standard_normal(s) for i, s in enumerate(shapes)]
    check_jvp_numeric(fn, primals, tangents)
    check_jvp_selects(fn, primals, tangents, _selected_tangent(case, primals, tangents))


def _selected_tangent(case, primals, tangents):
    """The winner's tangent of each output, by the reference rule."""
    if case in FMINMAX:
        a, b = np.broadcast_arrays(*primals)
        ta, tb = np.broadcast_arrays(*tangents)
        return np.where(a_wins(case, a, b), ta, tb)
    if case == "clamp":
        _, src = ref_clamp(primals[0], primals[1], primals[2], "float64")
        tx, tlo, thi = np.broadcast_arrays(*tangents)
        return np.choose(src, [tx, tlo, thi])
    x, v = primals[0], tangents[0]
    dim, keepdim, ext = {"amax": ((0, 2), False, "max"), "amin": (-1, True, "min"), "max_dim": (1, False, "max"),
                         "min_dim": (0, True, "min")}[case]
    idx = ref_arg(x, dim, ext)
    return ref_gather(v, idx, dim).reshape(out_shape(x.shape, dim, keepdim))


# ====================================================================== test_autograd.py


@pytest.mark.parametrize("name", ["amax", "amin", "max", "min", "max_dim", "min_dim"])
def test_min_max_median_backprops_to_all_values(name):
    """test_autograd.py test_min_max_median_backprops_to_all_values: for
    torch.min/max over all, x = [1, 0, 1, 0, 1, 0] (and [nan, nan, nan])
    gets x.grad == 1/3 at each tied extreme (evenly_distribute_backward;
    amax/amin: scale_grad_by_count). pylucid gives the whole gradient to the
    first winner: [1, 0, 0, 0, 0, 0] for max, [0, 1, 0, 0, 0, 0] for min,
    [1, 0, 0] for the NaNs. max/min with a dim: PyTorch routes to the
    returned index too (value_selecting_reduction_backward) — the same."""
    base, _, dim = name.partition("_")
    for values in ([1.0, 0.0, 1.0, 0.0, 1.0, 0.0], [nan] * 3):
        x = pylucid.tensor(np.array(values), requires_grad=True)
        r = op(base)(x, 0) if dim else op(base)(x)
        y = r.values if dim else r
        if base in ("max", "min") and not dim:
            assert y.grad_fn.name() == ("AmaxBackward" if base == "max" else "AminBackward") or \
                y.grad_fn.name() == NODE[base]
        y.backward()
        g = to_numpy(x.grad)
        first = int(ref_arg(np.array(values), None, EXTREME.get(base, base)).reshape(-1)[0])
        assert g.tolist() == [1.0 if i == first else 0.0 for i in range(len(values))]
        assert g.sum() == 1.0
    # a row of equal values: [g, 0, 0, ...] (PyTorch: g/4 each for amax/amin)
    x = pylucid.tensor(np.full((2, 4), 3.0), requires_grad=True)
    y = op(base)(x, 1) if dim else op("a" + base if base in ("max", "min") else base)(x, dim=1)
    y = y.values if dim else y
    y.backward(np.array([5.0, 7.0]))
    assert to_numpy(x.grad).tolist() == [[5.0, 0.0, 0.0, 0.0], [7.0, 0.0, 0.0, 0.0]]


# ====================================================================== schemas and Tensor methods (OpInfo names)


@pytest.mark.parametrize("name", ["fmin", "fmax", "clamp", "clip", "amin", "amax", "argmin", "argmax", "min", "max"])
def test_opinfo_schema(name):
    """The OpInfo entries by name (common_methods_invocations.py op_db: fmin,
    fmax, clamp with alias clip, amin, amax, argmin, argmax, min/max
    reduction_with_dim): each is a pylucid op with a schema of that name
    (clip: the clamp schema), version 1, PROMOTE, deterministic."""
    s = op(name).schema
    assert s.name == ("clamp" if name == "clip" else name)
    assert s.version == 1 and s.amp_policy is ops.AmpPolicy.PROMOTE and s.deterministic
    assert s in ops.schemas()


@pytest.mark.parametrize("method", ["fmin", "fmax", "minimum", "maximum"])
def test_tensor_binary_methods(method):
    """OpInfo method variants (Tensor.fmin, .fmax, .minimum, .maximum) equal
    the functions bit for bit, with a NumPy or scalar other."""
    rng = rng_for("methods", method)
    a = make_tensor((S, S), "float32", rng)
    b = make_tensor((S,), "float32", rng)
    a[0, 0], b[1] = np.nan, np.nan
    t = pylucid.tensor(a)
    for other in (b, pylucid.tensor(b), 0.5):
        same_bits(to_numpy(getattr(t, method)(other)), to_numpy(op(method)(a, other)))


# ====================================================================== test_ops.py: out= and grad; custom Function jvp

OUT_GRAD_CASES = {
    "amax": (lambda x, **kw: ops.amax(x, dim=1, **kw), lambda y: np.zeros(y.shape)),
    "fmin": (lambda x, **kw: ops.fmin(x, 0.25, **kw), lambda y: np.zeros(y.shape)),
    "clamp": (lambda x, **kw: ops.clamp(x, -0.5, 0.5, **kw), lambda y: np.zeros(y.shape)),
    "minimum": (lambda x, **kw: ops.minimum(x, 0.25, **kw), lambda y: np.zeros(y.shape)),
    "max_dim": (lambda x, **kw: ops.max(x, 0, **kw), lambda y: (np.zeros(y[0].shape), np.zeros(y[1].shape, np.int64))),
}


@pytest.mark.parametrize("case", list(OUT_GRAD_CASES))
def test_out_requires_grad_error(case):
    """test_ops.py TestCommon.test_out_requires_grad_error: "functions with
    out=... arguments don't support automatic differentiation, but one of
    the arguments requires grad" — RuntimeError, out untouched; under
    no_grad the same call works and returns out; argmax with an input that
    requires grad takes out= (it records no graph)."""
    fn, make_out = OUT_GRAD_CASES[case]
    x = pylucid.tensor(rng_for("out_grad", case).standard_normal((3, 4)), requires_grad=True)
    with pylucid.no_grad():
        want = fn(x)
    out = make_out(want)
    outs = out if isinstance(out, tuple) else (out,)
    before = [o.copy() for o in outs]
    with pytest.raises(RuntimeError):
        fn(x, out=out)
    for o, b in zip(outs, before):
        same_bits(o, b)
    with pylucid.no_grad():
        r = fn(x, out=out)
    assert all(a is b for a, b in zip(r, out)) if isinstance(out, tuple) else r is out
    wants = want if isinstance(want, tuple) else (want,)
    for o, w in zip(outs, wants):
        same_bits(o, to_numpy(w))
    idx = np.zeros(4, dtype=np.int64)
    assert ops.argmax(x, dim=0, out=idx) is idx
    assert np.array_equal(idx, np.argmax(to_numpy(x.detach()), axis=0))


def test_out_is_input_in_place():
    """test_ops.py TestCommon.test_out (the out= variant writes the result
    and returns out) with out an input itself: fmin(a, b, out=a),
    minimum(a, b, out=b), clamp(t, 0, 1, out=t) on a Tensor compute in place."""
    rng = rng_for("out_inplace")
    a = rng.standard_normal(8)
    b = rng.standard_normal(8)
    want = np.fmin(a, b)
    assert ops.fmin(a, b, out=a) is a
    same_bits(a, want)
    a = rng.standard_normal(8)
    want = to_numpy(ops.minimum(a, b))
    assert ops.minimum(a, b, out=b) is b
    same_bits(b, want)
    t = pylucid.tensor(rng.standard_normal((2, 3)))
    want = np.clip(to_numpy(t), 0, 1)
    assert ops.clamp(t, 0, 1, out=t) is t
    same_bits(to_numpy(t), want)


def test_custom_function_jvp():
    """torch/autograd/function.py _SingleLevelFunction.jvp: a custom Function
    without jvp raises NotImplementedError ("You must implement the jvp
    function for custom autograd.Function to use it with forward mode AD")
    under forward mode; with jvp(ctx, *tangents) its tangent flows into the
    family's ops (amax picks the winner's)."""

    class Double(autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return ops.mul(x, 2.0)

        @staticmethod
        def backward(ctx, g):
            return ops.mul(g, 2.0)

    class DoubleJvp(Double):
        @staticmethod
        def jvp(ctx, t):
            return ops.mul(t, 2.0)

    x = np.array([[1.0, 4.0, 2.0], [3.0, -1.0, 0.5]])
    v = np.array([[0.5, 0.25, 2.0], [1.0, 8.0, 4.0]])
    with pytest.raises(NotImplementedError):
        autograd.jvp(lambda t: ops.amax(Double.apply(t), dim=1), pylucid.from_numpy(x), pylucid.from_numpy(v))
    out, tan = autograd.jvp(lambda t: ops.amax(DoubleJvp.apply(t), dim=1), pylucid.from_numpy(x),
                            pylucid.from_numpy(v))
    same_bits(to_numpy(out), np.array([8.0, 6.0]))
    same_bits(to_numpy(tan), np.array([0.5, 2.0]))
