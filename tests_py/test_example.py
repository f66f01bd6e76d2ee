"""The README's main job: the example fits the piecewise-linear function."""

import importlib.util
import pathlib

EXAMPLE = pathlib.Path(__file__).resolve().parent.parent / "examples" / "fit_piecewise.py"


def load_example():
    spec = importlib.util.spec_from_file_location("fit_piecewise", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_fit_recovers_parameters():
    ex = load_example()
    fitted = ex.fit(steps=1500, verbose=False)
    for name, true in ex.TRUE.items():
        assert abs(fitted[name] - true) < 0.05, (name, fitted[name], true)


def test_fit_with_other_seed_and_noise():
    ex = load_example()
    fitted = ex.fit(steps=1500, seed=7, noise=0.2, verbose=False)
    for name, true in ex.TRUE.items():
        assert abs(fitted[name] - true) < 0.1, (name, fitted[name], true)
