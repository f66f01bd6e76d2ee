"""What a new user meets first (docs/install.md, docs/semantics.md): the
public names of pylucid.ops, and the examples' messages when an extra is
missing."""

import pathlib
import subprocess
import sys

import pytest

import pylucid
from pylucid import ops

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_dir_of_ops_lists_the_public_names_only():
    names = dir(ops)
    assert names == sorted(ops.__all__)
    assert {"minimum", "maximum", "amin", "clamp", "clip", "nanmax", "schemas", "MinMaxResult"} <= set(names)
    for internal in ("Any", "Dict", "sys", "functools", "enum", "operator", "binary", "call_op", "Tensor"):
        assert internal not in names
    assert all(not n.startswith("_") for n in names)
    assert all(hasattr(ops, n) for n in names)
    assert ops.Tensor is pylucid.Tensor  # still importable, only not listed


def test_the_package_namespace_shows_no_helpers_of_its_own() -> None:
    """dir(pylucid): the public names and the package's modules; no name
    that only pylucid/__init__.py used (``annotations``, typing's ``Any``)."""
    import types

    extra = [n for n in dir(pylucid) if not n.startswith("_") and n not in pylucid.__all__
             and not isinstance(getattr(pylucid, n), types.ModuleType)]
    assert extra == ["bool"]  # pylucid.bool (as torch.bool), kept out of __all__: a star import would shadow bool
    assert pylucid.bool is pylucid.bool_


def test_torch_example_without_torch_names_the_extra():
    # torch made unimportable (a None entry in sys.modules), as on a machine
    # without the extra
    code = ("import runpy, sys\nsys.modules['torch'] = None\nsys.argv = ['torch_train.py']\n"
            "runpy.run_path(%r, run_name='__main__')" % str(ROOT / "examples" / "torch_train.py"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    assert out.stderr.strip() == ('examples/torch_train.py needs PyTorch: install pylucid with its torch extra, '
                                  "`python3 -m pip install '.[torch]'` from a checkout (docs/install.md)")


def _public_ops():
    return [n for n in ops.__all__ if isinstance(getattr(ops, n), ops.Op)]


def test_every_public_op_has_a_signature_with_out():
    import inspect

    names = _public_ops()
    assert len(names) >= 20
    for n in names:
        sig = inspect.signature(getattr(ops, n))
        params = sig.parameters
        assert "out" in params and params["out"].kind is inspect.Parameter.KEYWORD_ONLY, (n, sig)
        first = next(iter(params.values()))
        assert first.name in ("a", "x") and first.default is inspect.Parameter.empty, (n, sig)
    assert str(inspect.signature(ops.minimum)) == "(a: 'Any', b: 'Any', *, out: 'Any' = None) -> 'Tensor'"
    assert list(inspect.signature(ops.clamp).parameters) == ["x", "min", "max", "out"]
    assert list(inspect.signature(ops.amax).parameters) == ["a", "dim", "keepdim", "out"]
    assert inspect.signature(ops.clip) == inspect.signature(ops.clamp)
    # keywords bind as the signature says
    t = pylucid.tensor([1.0, 5.0])
    assert ops.minimum(b=t, a=pylucid.tensor([2.0, 2.0])).tolist() == [1.0, 2.0]


def _message(fn):
    try:
        fn()
    except TypeError as e:
        return str(e)
    raise AssertionError("no TypeError")


def test_wrong_calls_name_the_public_function_and_argument():
    t = pylucid.tensor([1.0, 2.0])
    assert _message(lambda: ops.minimum(t)) == "minimum(): missing a required argument: 'b'"
    assert _message(lambda: ops.minimum(t, t, t)) == "minimum(): too many positional arguments"
    assert _message(lambda: ops.maximum(t, t, oops=1)) == "maximum(): got an unexpected keyword argument 'oops'"
    assert _message(lambda: ops.minimum(None, t)) == (
        "minimum(): argument 'a' must be a Tensor, array or number, not NoneType")
    assert _message(lambda: ops.fmin(t, "x")) == "fmin(): argument 'b' must be a Tensor, array or number, not str"
    assert _message(lambda: ops.clamp(None, 1)) == (
        "clamp(): argument 'x' must be a Tensor, array or number, not NoneType")
    assert _message(lambda: ops.clip(t, min="0")) == (  # clip is clamp itself (an alias: one op)
        "clamp(): argument 'min' must be a Tensor, array or number, not str")
    assert _message(lambda: ops.amin()) == "amin(): missing a required argument: 'a'"
    assert _message(lambda: ops.argmax(t, 0, False, 1)) == "argmax(): too many positional arguments"
    # the internals stay out of the message
    for fn in (lambda: ops.minimum(t), lambda: ops.nanmax(t, 0, True, None)):
        assert "_py_" not in _message(fn) and "_reduction" not in _message(fn)
    # errors from inside a well-formed call are the op's own
    import numpy as np

    try:
        ops.minimum(np.zeros(2), np.zeros(3))
    except ValueError as e:
        assert "cannot be broadcast" in str(e)
    assert ops.minimum(t, [0.0, 5.0]).tolist() == [0.0, 2.0]  # a list is an operand
    # min/max without a dim reduce as amin/amax, but name the function called
    empty = pylucid.tensor(np.zeros((0, 2)))
    for fn, start in [(lambda: ops.min(empty), "min: cannot reduce over a zero-size slice"),
                      (lambda: empty.max(), "max: cannot reduce over a zero-size slice"),
                      (lambda: ops.amax(empty), "amax: cannot reduce"),
                      (lambda: ops.max(t, out=pylucid.tensor(np.zeros(3))), "max: out has shape (3,)")]:
        with pytest.raises(ValueError) as info:
            fn()
        assert str(info.value).startswith(start), str(info.value)


def test_show_config_says_what_the_build_is():
    import ast
    import io
    import platform

    import numpy as np

    buf = io.StringIO()
    facts = pylucid.show_config(file=buf)
    lines = dict(line.split(": ", 1) for line in buf.getvalue().splitlines())
    assert list(lines) == ["pylucid", "go", "kernels", "cpu features", "threads", "platform", "python", "numpy",
                           "ml_dtypes"]
    assert lines["pylucid"] == pylucid.__version__
    assert lines["go"].startswith("go1.") and int(lines["go"].split(".")[1].split("-")[0]) >= 24
    assert lines["kernels"] in ("simd (AVX2)", "simd compiled, portable in use (no AVX2)", "portable")
    assert (lines["cpu features"] == "AVX2") == (lines["kernels"] == "simd (AVX2)")
    assert int(lines["threads"]) == pylucid.get_num_threads()
    assert lines["numpy"] == np.__version__
    assert lines["python"] == platform.python_version()
    assert facts["threads"] == pylucid.get_num_threads() and facts["kernels"] == lines["kernels"]
    pylucid.set_num_threads(1)
    try:
        assert pylucid.show_config(file=io.StringIO())["threads"] == 1
    finally:
        pylucid.set_num_threads(int(lines["threads"]))
    # the build that CI and the wheel make on x86-64 with Go 1.26 has the SIMD kernels
    if platform.machine() == "x86_64" and "-X:simd" in lines["go"]:
        assert lines["kernels"].startswith("simd")
    # the build's one line when it falls back to the portable kernels (setup.py)
    tree = ast.parse((ROOT / "setup.py").read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "portable_kernels_message")
    ns: dict = {}
    exec(compile(ast.Module([fn], []), "setup.py", "exec"), ns)
    msg = ns["portable_kernels_message"]((1, 25), None)
    assert msg.startswith("pylucid: building the portable kernels only (Go 1.25 has no GOEXPERIMENT=simd")
    assert "\n" not in msg and "show_config" in msg
    assert "GOEXPERIMENT=noregabi leaves out simd" in ns["portable_kernels_message"]((1, 26), "noregabi")
