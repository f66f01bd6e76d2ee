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
        s = table[op._name]  # clip is clamp under another name: the same op
        assert op.args[0] == s["id"], name  # the bound op id
        if s["signature"] == "minmax":  # and, for min/max, the op over every dim
            assert op.args == (s["id"], table[s["whole"]]["id"]), name
        else:
            assert op.args == (s["id"],), name
        assert s["kind"] in ("elementwise", "reduction") and not (s["kind"] == "elementwise" and s["attrs"])


def test_every_schema_with_a_signature_is_public():
    """A new op needs no Python: it appears in pylucid.ops from its record
    alone (its signature says how it is called, its doc is its docstring,
    its aliases its other names); an op without a signature is internal."""
    public = {getattr(ops, n)._name for n in ops.__all__ if isinstance(getattr(ops, n), ops.Op)}
    for s in _lib.schema_table():
        if s["signature"]:
            assert s["name"] in public, s["name"]
            assert s["doc"] and s["doc"] in getattr(ops, s["name"]).__doc__, s["name"]
            for alias in s["aliases"]:
                assert getattr(ops, alias) is getattr(ops, s["name"]), alias
        else:
            assert s["name"] not in public and s["kind"] not in ("elementwise", "reduction") or \
                s["name"] in ("cast", "copy"), s["name"]


def test_an_op_built_from_a_schema_works_without_hand_written_parts():
    """_build makes a working op from a schema record alone (as for an op
    added to the library later): a binary, a unary and a reduction."""
    table = _table()
    for name, args, want in [("maximum", ([1.0, 4.0], [3.0, 2.0]), [3.0, 4.0]),
                             ("neg", ([1.0, -2.0],), [-1.0, 2.0]),
                             ("sum", ([[1.0, 2.0], [3.0, 4.0]], 0), [4.0, 6.0])]:
        s = dict(table[name], name="new_" + name, doc="new_" + name + ": a made-up op")
        op = ops._build(s)
        assert op is not None and op.__doc__.startswith("new_" + name + "(")
        assert "\n\nnew_" + name + ": a made-up op\n\n" in op.__doc__
        np.testing.assert_array_equal(op(*args).numpy(), np.float32(want))


def test_clip_is_clamp():
    assert ops.clip is ops.clamp and ops.clip.schema.name == "clamp"


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


PUBLIC = [s for s in _lib.schema_table() if s["signature"]]


@pytest.mark.parametrize("s", PUBLIC, ids=[s["name"] for s in PUBLIC])
def test_every_op_docstring_is_complete_and_its_example_runs(s) -> None:
    """help(op) shows the op's signature, what the record says, every
    parameter with out=, what it returns and an example that runs (a
    doctest of the record's example)."""
    import doctest
    import inspect

    op = getattr(ops, s["name"])
    doc = op.__doc__
    first = doc.split("\n")[0]
    assert first.startswith(s["name"] + "(") and "out=None" in first, first
    params = [p for p in inspect.signature(op).parameters]
    section = doc[doc.index("Parameters\n----------"):doc.index("Returns\n-------")]
    named = [n for line in section.split("\n") if " : " in line and not line.startswith(" ")
             for n in line.split(" : ")[0].split(", ")]
    assert named == params, (s["name"], named, params)  # each parameter, in order
    assert s["doc"] in doc and "Examples\n--------" in doc
    test = doctest.DocTestParser().get_doctest(doc, {}, s["name"], None, 0)
    assert len(test.examples) > 3  # the imports and the record's example
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test, out=lambda text: pytest.fail(text))
    assert runner.summarize(verbose=False).failed == 0
