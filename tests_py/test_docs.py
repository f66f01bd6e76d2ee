"""Every public Python name has a docstring (the README and docs/ point users
to them), and the package ships its type information (py.typed)."""

import inspect
import pathlib

import pylucid
from pylucid import amp, autograd, dlpack, dtypes, ops

MODULES = {"pylucid": pylucid, "pylucid.ops": ops, "pylucid.autograd": autograd, "pylucid.amp": amp,
           "pylucid.dlpack": dlpack}
try:  # the JAX bridge, where JAX is installed
    import pylucid.jax

    MODULES["pylucid.jax"] = pylucid.jax
except ImportError:
    pass
PUBLIC_DUNDERS = {"__dlpack__", "__dlpack_device__", "__call__"}
try:  # the framework bridges, where their framework is installed
    import pylucid.torch

    MODULES["pylucid.torch"] = pylucid.torch
except ImportError:
    pass
try:
    import pylucid.dask

    MODULES["pylucid.dask"] = pylucid.dask
except ImportError:
    pass


def _public_objects():
    seen = set()
    for mname, mod in MODULES.items():
        assert mod.__doc__, mname
        for name in mod.__all__:
            obj = getattr(mod, name)
            if isinstance(obj, (int, float, str, tuple, dtypes.dtype)) or inspect.ismodule(obj):
                continue
            yield "%s.%s" % (mname, name), obj
            if inspect.isclass(obj) and obj not in seen:
                seen.add(obj)
                for attr, val in vars(obj).items():
                    if attr.startswith("_") and attr not in PUBLIC_DUNDERS:
                        continue
                    if callable(val) or isinstance(val, (property, staticmethod, classmethod)):
                        yield "%s.%s.%s" % (mname, name, attr), val


def test_every_public_name_has_a_docstring():
    names = list(_public_objects())
    assert len(names) > 60  # the walk found the API
    missing = [n for n, obj in names if not (inspect.getdoc(obj) or "").strip()]
    assert not missing, missing


def test_every_public_function_is_annotated():
    unannotated = []
    for name, obj in _public_objects():
        fn = obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj
        fn = fn.fget if isinstance(fn, property) else fn
        if inspect.isfunction(fn) and "return" not in fn.__annotations__:
            unannotated.append(name)
    assert not unannotated, unannotated


def test_py_typed_is_shipped():
    assert (pathlib.Path(pylucid.__file__).parent / "py.typed").is_file()
