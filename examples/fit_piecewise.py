"""Recover a concave piecewise-linear function y = min(a1*x + b1, a2*x + b2)
from noisy samples by gradient descent with pylucid.

The gradient of `minimum` goes to whichever line is lower at each sample, so
each line is fitted only on its own side of the kink.

    python examples/fit_piecewise.py
"""

from __future__ import annotations

import argparse
import sys
from typing import Dict

import numpy as np

import pylucid
from pylucid import ops

TRUE = {"a1": 2.0, "b1": 1.0, "a2": -1.0, "b2": 4.0}


def make_data(n: int, noise: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-3.0, 4.0, size=n)
    y = np.minimum(TRUE["a1"] * x + TRUE["b1"], TRUE["a2"] * x + TRUE["b2"])
    return x, y + rng.normal(0.0, noise, size=n)


def fit(steps: int = 1500, lr: float = 0.05, n: int = 2000, noise: float = 0.1, seed: int = 0,
        log_every: int = 100, verbose: bool = True) -> Dict[str, float]:
    x_np, y_np = make_data(n, noise, seed)
    x = pylucid.from_numpy(x_np)  # shares memory with the NumPy array
    y = pylucid.from_numpy(y_np)
    # Start from two different lines so the kink can form.
    params = {
        name: pylucid.tensor(np.float64(v), requires_grad=True)
        for name, v in {"a1": 0.5, "b1": 0.0, "a2": -0.5, "b2": 0.0}.items()
    }
    loss_value = float("nan")
    for step in range(steps + 1):
        p = params
        pred = ops.minimum(p["a1"] * x + p["b1"], p["a2"] * x + p["b2"])
        err = pred - y
        loss = (err * err).mean()
        loss.backward()
        loss_value = loss.item()
        if verbose and step % log_every == 0:
            print("step %5d  loss %.6f" % (step, loss_value))
        with pylucid.no_grad():
            params = {}
            for name, t in p.items():
                g = t.grad
                assert g is not None
                params[name] = (t - lr * g).detach().requires_grad_()
    fitted = {name: t.item() for name, t in params.items()}
    if verbose:
        print("\nparameter   fitted     true")
        for name in ("a1", "b1", "a2", "b2"):
            print("%-9s %8.4f %8.4f" % (name, fitted[name], TRUE[name]))
        print("final loss %.6f (noise variance %.6f)" % (loss_value, noise**2))
    return fitted


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    fitted = fit(steps=args.steps, lr=args.lr, seed=args.seed)
    worst = max(abs(fitted[k] - TRUE[k]) for k in TRUE)
    print("largest parameter error %.4f" % worst)
    return 0 if worst < 0.1 else 1


if __name__ == "__main__":
    sys.exit(main())
