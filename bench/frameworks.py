"""pylucid inside PyTorch and JAX, against the frameworks' own ops, measured
side by side in one run (float32; ratios, not times: the machines are
shared). The targets are docs/interop.md's.

    python3 bench/frameworks.py [--quick] [--json FILE]

Rows: pylucid.torch.minimum against torch.minimum, eager without grad at
1,000 elements, forward+backward per call at 1,000 and 2^24, a small-box
training step (about ten min/max/clamp calls in its loss) and, under
torch.compile(fullgraph=True), forward+backward at 2^24; pylucid.jax.minimum
against jnp.minimum, jitted forward at 1,000 and 2^24, jit(grad) and
jit(jvp) at 2^24. Rows without a target: the floor of any
torch.autograd.Function at a box loss's size (which bounds the training
step's ratio), and clamp with one bound (a model's commonest clamp) at 2^24
in both frameworks.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Callable, Dict, List, Optional

import numpy as np

import pylucid


def median_time(fn: Callable[[], Any], reps: int, inner: int = 1) -> float:
    fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        ts.append((time.perf_counter() - t) / inner)
    return sorted(ts)[len(ts) // 2]


def pair(ours: Callable[[], Any], theirs: Callable[[], Any], reps: int, inner: int = 1) -> tuple[float, float]:
    """Both timed in alternation, each the median of its own runs."""
    a: List[float] = []
    b: List[float] = []
    ours()
    theirs()
    for _ in range(reps):
        a.append(median_time(ours, 1, inner))
        b.append(median_time(theirs, 1, inner))
    return sorted(a)[reps // 2], sorted(b)[reps // 2]


ROWS: List[Dict[str, Any]] = []


def row(case: str, ours: float, theirs: float, peer: str, target: Optional[float]) -> None:
    """One line of the table; target None: a row that explains another (no target)."""
    r = {"case": case, "pylucid_ms": ours * 1e3, "peer": peer, "peer_ms": theirs * 1e3,
         "ratio": ours / theirs, "target": target, "met": target is None or ours / theirs <= target}
    ROWS.append(r)
    verdict = "(%s, no target)" % peer if target is None else "(<= %.1fx %s) %s" % (
        target, peer, "met" if r["met"] else "NOT met")
    print("%-44s %10.4f %10.4f  %5.2fx  %s" % (case, r["pylucid_ms"], r["peer_ms"], r["ratio"], verdict))
    sys.stdout.flush()


def torch_rows(quick: bool) -> None:
    import torch

    import pylucid.torch as pt

    torch.set_num_threads(pylucid.get_num_threads())
    rng = np.random.default_rng(0)
    small = [torch.from_numpy(rng.standard_normal(1000).astype(np.float32)) for _ in range(2)]
    a, b = small
    n = 200 if quick else 1000
    row("torch eager forward, no grad, 1,000", *pair(lambda: pt.minimum(a, b), lambda: torch.minimum(a, b),
                                                       7, n), "torch.minimum", 3.0)
    ag, bg = a.clone().requires_grad_(), b.clone().requires_grad_()
    ones = torch.ones(1000)

    def step(fn: Callable[..., Any]) -> Callable[[], Any]:
        return lambda: torch.autograd.grad(fn(ag, bg), (ag, bg), ones)

    row("torch eager forward+backward, 1,000", *pair(step(pt.minimum), step(torch.minimum), 7, n // 4),
        "torch.minimum", 1.5)
    big = 1 << (22 if quick else 24)
    A = torch.from_numpy(rng.standard_normal(big).astype(np.float32)).requires_grad_()
    B = torch.from_numpy(rng.standard_normal(big).astype(np.float32)).requires_grad_()
    G = torch.ones(big)

    def big_step(fn: Callable[..., Any]) -> Callable[[], Any]:
        return lambda: torch.autograd.grad(fn(A, B), (A, B), G)

    row("torch eager forward+backward, 2^%d" % (big.bit_length() - 1),
        *pair(big_step(pt.minimum), big_step(torch.minimum), 5), "torch.minimum", 0.5)
    row("torch clamp(min=0) forward+backward, 2^%d" % (big.bit_length() - 1),
        *pair(lambda: torch.autograd.grad(pt.clamp(A, min=0.0), A, G),
              lambda: torch.autograd.grad(torch.clamp(A, min=0.0), A, G), 5), "torch.clamp", None)
    row("torch clamp(-0.5, 0.5) forward+backward, 2^%d" % (big.bit_length() - 1),
        *pair(lambda: torch.autograd.grad(pt.clamp(A, -0.5, 0.5), A, G),
              lambda: torch.autograd.grad(torch.clamp(A, -0.5, 0.5), A, G), 5), "torch.clamp", None)

    # A small-box loss: intersection over union of 64 boxes, min/max/clamp
    # about ten times, against the same loss with torch's ops.
    boxes = torch.rand(64, 4)
    model = torch.nn.Linear(4, 4)
    target = torch.rand(64, 4)

    def box_loss(mn: Callable[..., Any], mx: Callable[..., Any], cl: Callable[..., Any]) -> Callable[[], Any]:
        def run() -> None:
            p = model(boxes)
            x1, y1 = mx(p[:, 0], target[:, 0]), mx(p[:, 1], target[:, 1])
            x2, y2 = mn(p[:, 2], target[:, 2]), mn(p[:, 3], target[:, 3])
            inter = cl(x2 - x1, min=0.0) * cl(y2 - y1, min=0.0)
            area = cl(p[:, 2] - p[:, 0], min=0.0) * cl(p[:, 3] - p[:, 1], min=0.0)
            union = area + 1.0 - inter
            loss = (1.0 - inter / union).mean() + cl(p, -1.0, 1.0).mean() + mx(p[:, 0], p[:, 2]).mean()
            model.zero_grad()
            loss.backward()
        return run

    row("torch training step, small-box loss", *pair(box_loss(pt.minimum, pt.maximum, pt.clamp),
                                                    box_loss(torch.minimum, torch.maximum, torch.clamp), 7, n // 10),
        "torch's ops", 1.2)
    floor_row(n)

    def compiled(fn: Callable[..., Any]) -> Callable[[], Any]:
        f = torch.compile(lambda x, y: fn(x, y).sum(), fullgraph=True)
        return lambda: torch.autograd.grad(f(A, B), (A, B))

    row("torch.compile forward+backward, 2^%d" % (big.bit_length() - 1),
        *pair(compiled(pt.minimum), compiled(torch.minimum), 5), "compiled torch.minimum", 1.0)


def floor_row(n: int) -> None:
    """What any torch.autograd.Function around pylucid's kernels costs at a
    box loss's size (64 elements of a strided column, one input requiring
    grad): the least Function there is (forward: the winners kernel;
    backward: the one-part route), against torch.maximum. Its excess per
    call, times the loss's calls, bounds the training step's ratio from
    below."""
    import torch

    import pylucid.torch as pt

    hot, op_id, codes = pt._hot, pt._IDS["maximum"], pt._CODES

    class Least(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor) -> Any:
            y, who = hot.lent_binary(op_id, True, a, b, codes, torch.empty_like, {"dtype": torch.bool})
            ctx.mark_non_differentiable(who)
            ctx.save_for_backward(who)
            return y, who

        @staticmethod
        def backward(ctx: Any, gy: torch.Tensor, _: Any) -> Any:
            (who,) = ctx.saved_tensors
            ga = torch.empty(who.shape, dtype=gy.dtype)
            hot.lent(op_id, 4, (who, gy), (0,), (ga,), codes)
            return ga, None

    p = torch.rand(64, 4, requires_grad=True)
    x, t, g = p[:, 0], torch.rand(64, 4)[:, 0], torch.ones(64)
    row("torch bare Function fwd+bwd, 64 (floor)",
        *pair(lambda: torch.autograd.grad(Least.apply(x, t)[0], p, g),
              lambda: torch.autograd.grad(torch.maximum(x, t), p, g), 7, n // 4), "torch.maximum", None)


def jax_rows(quick: bool) -> None:
    import jax
    import jax.numpy as jnp

    import pylucid.jax as pj

    rng = np.random.default_rng(0)
    n = 300 if quick else 1000
    a, b = (jnp.asarray(rng.standard_normal(1000).astype(np.float32)) for _ in range(2))
    fo, ft = jax.jit(pj.minimum), jax.jit(jnp.minimum)
    row("jax jit forward, 1,000", *pair(lambda: fo(a, b).block_until_ready(), lambda: ft(a, b).block_until_ready(),
                                        7, n), "jnp.minimum", 1.3)
    big = 1 << (22 if quick else 24)
    A, B = (jnp.asarray(rng.standard_normal(big).astype(np.float32)) for _ in range(2))
    row("jax jit forward, 2^%d" % (big.bit_length() - 1),
        *pair(lambda: fo(A, B).block_until_ready(), lambda: ft(A, B).block_until_ready(), 5), "jnp.minimum", 1.0)
    go = jax.jit(jax.grad(lambda x, y: jnp.sum(pj.minimum(x, y)), argnums=(0, 1)))
    gt = jax.jit(jax.grad(lambda x, y: jnp.sum(jnp.minimum(x, y)), argnums=(0, 1)))
    row("jax jit(grad), 2^%d" % (big.bit_length() - 1),
        *pair(lambda: jax.block_until_ready(go(A, B)), lambda: jax.block_until_ready(gt(A, B)), 5), "jnp.minimum", 1.0)
    co = jax.jit(jax.grad(lambda x: jnp.sum(pj.clamp(x, 0.0))))
    ct = jax.jit(jax.grad(lambda x: jnp.sum(jnp.clip(x, 0.0))))
    row("jax jit(grad) clamp(x, 0), 2^%d" % (big.bit_length() - 1),
        *pair(lambda: jax.block_until_ready(co(A)), lambda: jax.block_until_ready(ct(A)), 5), "jnp.clip", None)
    jo = jax.jit(lambda x, y, t: jax.jvp(pj.minimum, (x, y), (t, t)))
    jt = jax.jit(lambda x, y, t: jax.jvp(jnp.minimum, (x, y), (t, t)))
    T = jnp.ones(big, jnp.float32)
    row("jax jit(jvp), 2^%d" % (big.bit_length() - 1),
        *pair(lambda: jax.block_until_ready(jo(A, B, T)), lambda: jax.block_until_ready(jt(A, B, T)), 5),
        "jnp.minimum", 1.0)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer repetitions, 2^22 for the big rows")
    p.add_argument("--json", help="also write the rows to this file")
    args = p.parse_args(argv)
    print("%-44s %10s %10s  %s" % ("case", "pylucid ms", "peer ms", "ratio (target)"))
    for name, fn in (("torch", torch_rows), ("jax", jax_rows)):
        try:
            __import__(name)
        except ImportError:
            print("(%s is not installed: its rows are skipped)" % name)
            continue
        fn(args.quick)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(ROWS, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
