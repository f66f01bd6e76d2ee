"""``repr(tensor)``: PyTorch's layout (torch/_tensor_str.py, default print
options) around NumPy's formatting of the numbers.

The layout follows PyTorch exactly: the ``tensor(`` prefix; rows aligned
under the first one, with one blank line more per dimension between blocks;
vectors wrapped to 80 columns; more than 1000 elements summarised to the
first and last 3 of each dimension with ``...``; the suffixes
``size=(…)`` (empty tensors that are not 1-D), ``dtype=pylucid.…`` (every
dtype but float32, int64 and bool; for empty tensors every dtype but
float32), ``grad_fn=<…>`` or ``requires_grad=True``, moved to a new line when
the line would pass 80 columns. Each number is written as NumPy's
``array2string`` writes it among the (shown) values; bfloat16 values are
written through their exact float32 values (as PyTorch does), so no
ml_dtypes is needed.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Iterator, List

import numpy as np

from ._convert import values
from .dtypes import bool_, float32, int64

if TYPE_CHECKING:
    from .tensor import Tensor

# PyTorch's default print options.
LINEWIDTH = 80
THRESHOLD = 1000
EDGEITEMS = 3


def _summarized(a: np.ndarray) -> np.ndarray:
    """The elements a summarised print shows (PyTorch's get_summarized_data)."""
    if a.ndim == 0:
        return a
    if a.shape[0] > 2 * EDGEITEMS:
        a = np.concatenate((a[:EDGEITEMS], a[-EDGEITEMS:]))
    if a.ndim == 1:
        return a
    return np.stack([_summarized(x) for x in a])


def _formatted(values: np.ndarray) -> List[str]:
    """NumPy's strings for values (1-D), all of one width, as array2string
    writes them side by side."""
    body = np.array2string(values, separator=",", max_line_width=sys.maxsize, threshold=sys.maxsize)
    return body[1:-1].split(",")


def _vector(a: np.ndarray, indent: int, summarize: bool, width: int, strs: Iterator[str]) -> str:
    per_line = max(1, (LINEWIDTH - indent) // (width + 2))
    if summarize and a.shape[0] > 2 * EDGEITEMS:
        data = [next(strs) for _ in range(EDGEITEMS)] + [" ..."] + [next(strs) for _ in range(EDGEITEMS)]
    else:
        data = [next(strs) for _ in range(a.shape[0])]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested(a: np.ndarray, indent: int, summarize: bool, width: int, strs: Iterator[str]) -> str:
    if a.ndim == 1:
        return _vector(a, indent, summarize, width, strs)
    n = a.shape[0]
    if summarize and n > 2 * EDGEITEMS:
        rows = ([_nested(a[i], indent + 1, summarize, width, strs) for i in range(EDGEITEMS)] + ["..."]
                + [_nested(a[i], indent + 1, summarize, width, strs) for i in range(n - EDGEITEMS, n)])
    else:
        rows = [_nested(a[i], indent + 1, summarize, width, strs) for i in range(n)]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(rows) + "]"


def _add_suffixes(text: str, suffixes: List[str], indent: int) -> str:
    parts = [text]
    last = len(text) - text.rfind("\n") + 1  # PyTorch's count, kept as it is
    for s in suffixes:
        if last + len(s) + 2 > LINEWIDTH:
            parts.append(",\n" + " " * indent + s)
            last = indent + len(s)
        else:
            parts.append(", " + s)
            last += len(s) + 2
    parts.append(")")
    return "".join(parts)


def tensor_repr(t: "Tensor") -> str:
    prefix = "tensor("
    indent = len(prefix)
    data = t.detach()
    dt = data.dtype
    arr = values(data)
    suffixes = []
    if arr.size == 0:
        if arr.ndim != 1:
            suffixes.append("size=%s" % (tuple(arr.shape),))
        if dt is not float32:
            suffixes.append("dtype=%r" % dt)
        body = "[]"
    else:
        if dt not in (float32, int64, bool_):
            suffixes.append("dtype=%r" % dt)
        if arr.ndim == 0:
            body = np.array2string(arr)
        else:
            summarize = arr.size > THRESHOLD
            shown = _summarized(arr) if summarize else arr
            strs = _formatted(shown.ravel())
            body = _nested(arr, indent, summarize, len(strs[0]), iter(strs))
    if t.requires_grad:
        fn = t.grad_fn
        suffixes.append("grad_fn=<%s>" % fn.name() if fn is not None else "requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)
