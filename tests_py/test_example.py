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


TORCH_EXAMPLE = EXAMPLE.parent / "torch_train.py"


def test_torch_example_trains_and_matches_torch_off_ties():
    import pytest

    pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("torch_train", TORCH_EXAMPLE)
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    ours = ex.train(steps=60, verbose=False)
    assert ours["losses"][-1] < 0.5 * ours["losses"][0] and ours["accuracy"] > 0.9, ours
    # tie-free float data: the same losses as with torch.amax / torch.clamp
    assert ours["losses"] == ex.train(steps=60, verbose=False, reference=True)["losses"]
    assert "splits it evenly" in ex.TIES and "first tied" in ex.TIES


def test_torch_example_under_torch_compile_matches_eager():
    import pytest

    pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("torch_train", TORCH_EXAMPLE)
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    eager = ex.train(steps=20, verbose=False, log_every=5)
    compiled = ex.train(steps=20, verbose=False, log_every=5, compile=True)
    # inductor may sum in another order: the same losses to float32 rounding
    for a, b in zip(compiled["losses"], eager["losses"]):
        assert abs(a - b) <= 1e-5 * max(1.0, abs(b)), (compiled["losses"], eager["losses"])
    assert compiled["accuracy"] > 0.9


def test_torch_example_main_prints_loss_and_the_tie_rule(capsys):
    import pytest

    pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("torch_train", TORCH_EXAMPLE)
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    assert ex.main(["--steps", "3"]) == 0
    out = capsys.readouterr().out
    assert "step    0  hinge loss" in out and "final hinge loss" in out and ex.TIES in out


DASK_EXAMPLE = EXAMPLE.parent / "dask_minimum.py"


def test_dask_example_stays_under_the_worker_memory_limit(capsys):
    import pytest

    pytest.importorskip("dask.distributed")
    import numpy as np

    import pylucid
    from pylucid import autograd, ops

    spec = importlib.util.spec_from_file_location("dask_minimum", DASK_EXAMPLE)
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    assert ex.main(["--small"]) == 0  # 1 when a worker's peak memory passed its limit
    out = capsys.readouterr().out
    assert "100% Completed" in out and "loss = sum(clamp(minimum(a, b), -1, 1))" in out
    # the same run, its numbers checked against pylucid on the whole arrays
    r = ex.run(total_bytes=16 << 20, chunk=1 << 19, n_workers=2, worker_memory="384MiB", verbose=False)
    assert len(r["peak_rss"]) == 2
    for w, peak in r["peak_rss"].items():
        assert 0 < peak < r["memory_limit"][w], (w, peak)
    a, b = (x.compute(scheduler="threads") for x in ex.make_inputs(r["n"], 1 << 19))
    ta, tb = pylucid.from_numpy(a, True), pylucid.from_numpy(b, True)
    loss = ops.clamp(ops.minimum(ta, tb), -1.0, 1.0).sum()
    ga, gb = autograd.grad(loss, [ta, tb])
    assert r["grad_a_sum"] == ga.numpy().sum(dtype=np.float64) and r["grad_b_sum"] == gb.numpy().sum(dtype=np.float64)
    assert abs(r["loss"] - float(loss.detach().numpy())) <= 1e-5 * float(np.abs(a).sum())  # float32 sums, other order
