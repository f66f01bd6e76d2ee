"""pylucid.ops is built from the schemas the library exports, and every op
call goes through the one generic entry, lucid_op, by the exported id."""

import sys

import numpy as np
import pytest

import pylucid
from pylucid import _lib, ops

tmod = sys.modules["pylucid.tensor"]


def _table():
    return {s["name"]: s for s in _lib.schema_table()}


def test_each_public_op_calls_its_exported_id():
    table = _table()
    for name in ops.__all__:
        op = getattr(ops, name)
        if not isinstance(op, ops.Op):
            continue
        s = table[op.schema.name]  # clip is clamp (same op object, schema "clamp")
        assert op.args == (s["id"],), name  # the partial's bound op id
        assert s["kind"] in ("elementwise", "reduction") and not (s["kind"] == "elementwise" and s["attrs"])


def test_every_callable_schema_is_public_or_internal():
    """A new elementwise op or reduction needs no Python: it appears in
    pylucid.ops from its schema alone."""
    public = {n for n in ops.__all__ if isinstance(getattr(ops, n), ops.Op)}
    for s in _lib.schema_table():
        callable_kind = s["kind"] == "reduction" or (s["kind"] == "elementwise" and not s["attrs"])
        if callable_kind and s["name"] not in ops._INTERNAL:
            assert s["name"] in public, s["name"]
        else:
            assert s["name"] not in public, s["name"]


def test_an_op_built_from_a_schema_works_without_hand_written_parts():
    """_build makes a working op from a schema record alone (as for an op
    added to the library later): a binary, a unary and a reduction."""
    table = _table()
    for name, args, want in [("maximum", ([1.0, 4.0], [3.0, 2.0]), [3.0, 4.0]),
                             ("neg", ([1.0, -2.0],), [-1.0, 2.0]),
                             ("sum", ([[1.0, 2.0], [3.0, 4.0]], 0), [4.0, 6.0])]:
        s = dict(table[name], name="new_" + name)  # not in _DOCS
        op = ops._build(s)
        assert op is not None and op.__doc__ and "new_" + name in op.__doc__
        np.testing.assert_array_equal(op(*args).numpy(), np.float32(want))


def test_module_ids_are_the_exported_ones():
    table = _table()
    for const, name in [("ADD", "add"), ("SUB", "sub"), ("MUL", "mul"), ("DIV", "div"), ("MINIMUM", "minimum"),
                        ("MAXIMUM", "maximum"), ("SUM", "sum"), ("MEAN", "mean"), ("NEG", "neg"), ("CAST", "cast"),
                        ("COPY", "copy")]:
        assert getattr(tmod, const) == table[name]["id"], const


def test_the_c_path_takes_only_ids_of_its_kind():
    hot = tmod._hot
    x = pylucid.tensor([1.0, 2.0])
    with pytest.raises(ValueError, match="unknown binary op"):
        hot.binary(tmod.SUM, x, x)  # a reduction's id
    with pytest.raises(ValueError, match="unknown binary op"):
        hot.binary(tmod.NEG, x, x)  # a unary op's id
    with pytest.raises(ValueError, match="unknown reduction"):
        hot.reduce_all(tmod.ADD, x, False)
    with pytest.raises(ValueError, match="unknown reduction"):
        hot.reduce_all(-1, x, False)
    np.testing.assert_array_equal(hot.binary(tmod.MAXIMUM, x, x).numpy(), [1.0, 2.0])


def test_the_python_path_reports_a_wrong_id_clearly():
    x = pylucid.tensor([1.0, 2.0])
    with pytest.raises(ValueError, match="sum takes 1 inputs, got 2"):
        tmod._py_binary(tmod.SUM, x, x)
    with pytest.raises(ValueError, match="unknown op id"):
        tmod._py_binary(10**6, x, x)
    with pytest.raises(ValueError, match="minimum takes 2 inputs, got 1"):
        tmod._py_reduce(tmod.MINIMUM, x, None, False)
