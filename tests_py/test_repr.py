"""repr(tensor): PyTorch's layout (torch/_tensor_str.py: _str_intern,
_tensor_str_with_formatter, _vector_str, _add_suffixes, get_summarized_data,
with the default print options linewidth=80, threshold=1000, edgeitems=3)
around NumPy's array2string numbers. Expected strings are written by hand
from those rules."""

import numpy as np

import pylucid
from pylucid import ops


def test_rows_align_under_the_first_one() -> None:
    t = pylucid.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert repr(t) == "tensor([[0., 1., 2.],\n        [3., 4., 5.]])"


def test_blocks_of_3d_tensors_are_separated_by_a_blank_line() -> None:
    t = pylucid.tensor(np.arange(8).reshape(2, 2, 2))
    assert repr(t) == ("tensor([[[0, 1],\n"
                       "         [2, 3]],\n"
                       "\n"
                       "        [[4, 5],\n"
                       "         [6, 7]]])")


def test_dtype_suffix_only_for_non_default_dtypes() -> None:
    # PyTorch: float32 (the default), int64 and bool print no dtype
    assert repr(pylucid.tensor([1.5, 2.0])) == "tensor([1.5, 2. ])"
    assert repr(pylucid.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(pylucid.tensor([True, False])) == "tensor([ True, False])"
    assert repr(pylucid.tensor([1, 2], dtype="int32")) == "tensor([1, 2], dtype=pylucid.int32)"
    assert repr(pylucid.tensor([1.0], dtype="float64")) == "tensor([1.], dtype=pylucid.float64)"
    assert repr(pylucid.tensor([0.5], dtype="float16")) == "tensor([0.5], dtype=pylucid.float16)"


def test_zero_dim_tensors() -> None:
    assert repr(pylucid.tensor(3.0)) == "tensor(3.)"
    assert repr(pylucid.tensor(7)) == "tensor(7)"
    assert repr(pylucid.tensor(True)) == "tensor(True)"
    assert repr(pylucid.tensor(2.5, dtype="bfloat16")) == "tensor(2.5, dtype=pylucid.bfloat16)"


def test_empty_tensors_show_size_unless_1d_and_dtype_unless_float32() -> None:
    assert repr(pylucid.tensor(np.zeros((0,), np.float32))) == "tensor([])"
    assert repr(pylucid.tensor(np.zeros((0, 3), np.float32))) == "tensor([], size=(0, 3))"
    assert repr(pylucid.tensor(np.zeros((0,), np.int64))) == "tensor([], dtype=pylucid.int64)"
    assert repr(pylucid.tensor(np.zeros((2, 0), bool))) == "tensor([], size=(2, 0), dtype=pylucid.bool)"


def test_grad_suffixes() -> None:
    x = pylucid.tensor([1.0, 2.0], requires_grad=True)
    assert repr(x) == "tensor([1., 2.], requires_grad=True)"
    assert repr(ops.minimum(x, 1.5)) == "tensor([1. , 1.5], grad_fn=<MinimumBackward>)"
    h = pylucid.tensor([1.0], dtype="float16", requires_grad=True)
    assert repr(h) == "tensor([1.], dtype=pylucid.float16, requires_grad=True)"


def test_long_vectors_wrap_at_80_columns() -> None:
    # element width 3 + 2 => (80 - 7) // 5 = 14 per line, continuation indented by 8
    t = pylucid.tensor(np.arange(30, dtype=np.float32))
    assert repr(t) == ("tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
                       "        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n"
                       "        28., 29.])")


def test_suffixes_move_to_a_new_line_past_80_columns() -> None:
    t = pylucid.tensor(np.arange(13, dtype=np.float16) + 10)
    assert repr(t) == ("tensor([10., 11., 12., 13., 14., 15., 16., 17., 18., 19., 20., 21., 22.],\n"
                       "       dtype=pylucid.float16)")


def test_more_than_1000_elements_are_summarised() -> None:
    t = pylucid.tensor(np.arange(10000).reshape(100, 100))
    assert repr(t) == ("tensor([[   0,    1,    2,  ...,   97,   98,   99],\n"
                       "        [ 100,  101,  102,  ...,  197,  198,  199],\n"
                       "        [ 200,  201,  202,  ...,  297,  298,  299],\n"
                       "        ...,\n"
                       "        [9700, 9701, 9702,  ..., 9797, 9798, 9799],\n"
                       "        [9800, 9801, 9802,  ..., 9897, 9898, 9899],\n"
                       "        [9900, 9901, 9902,  ..., 9997, 9998, 9999]])")
    v = pylucid.tensor(np.arange(1001) % 7)
    assert repr(v) == "tensor([0, 1, 2,  ..., 4, 5, 6])"


def test_bfloat16_values_print_through_their_exact_float32_values() -> None:
    t = pylucid.tensor([1.0, 0.1, -2.0], dtype="bfloat16")
    assert repr(t) == "tensor([ 1.        ,  0.10009766, -2.        ], dtype=pylucid.bfloat16)"
