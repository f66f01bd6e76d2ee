"""Train a small PyTorch model whose forward pass runs pylucid's min/max ops.

A 2-layer MLP classifies three Gaussian blobs in the plane. Its hidden
activation is ``pylucid.torch.clamp(h, min=0)`` (a ReLU) and its loss is the
multiclass hinge loss of Crammer and Singer,

    loss_i = clamp(1 + amax_{j != y_i} logits_ij - logits_i,y_i, min=0)

with ``pylucid.torch.amax`` over the wrong classes' logits. The optimiser is
``torch.optim.Adam``; autograd is torch's, each pylucid op's backward runs
pylucid's kernels on the torch tensors' memory (docs/interop.md).

What changes at ties, compared with torch's own ops: where several wrong
classes share the largest logit, ``torch.amax`` splits the gradient evenly
among them; ``pylucid.torch.amax`` gives it whole to the first of them (the
lowest class index). Where a hidden unit is exactly 0, the gradient goes to
the input (``torch.relu`` gives 0 there). Off ties, which is almost always
with float data, the two agree bit for bit: ``--reference`` trains the same
model with ``torch.amax``/``torch.clamp`` and prints the same losses.

``--compile`` runs the model and its loss under
``torch.compile(fullgraph=True)``: pylucid's ops are ``torch.library`` ops,
so the whole step is one graph (inductor's), and the losses are eager's.

    python examples/torch_train.py [--steps 100] [--reference] [--compile]
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable, Dict

try:
    import torch
except ModuleNotFoundError:  # the example needs the torch extra
    sys.exit("examples/torch_train.py needs PyTorch: install pylucid with its torch extra, "
             "`python3 -m pip install '.[torch]'` from a checkout (docs/install.md)")

import pylucid.torch as pt

TIES = ("at ties pylucid.torch.amax gives the whole gradient to the first tied class "
        "(torch.amax splits it evenly); clamp at a bound sends it to the input")


def make_data(n: int = 600, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    centers = torch.tensor([[0.0, 2.0], [-1.8, -1.0], [1.8, -1.0]])
    y = torch.arange(n) % 3
    x = centers[y] + 0.7 * torch.randn(n, 2, generator=g)
    return x, y


def hinge_loss(logits: torch.Tensor, y: torch.Tensor, amax: Callable[..., torch.Tensor],
               clamp: Callable[..., torch.Tensor]) -> torch.Tensor:
    correct = logits.gather(1, y[:, None])[:, 0]
    wrong = logits.masked_fill(torch.nn.functional.one_hot(y, logits.shape[1]).bool(), -1e9)
    # the largest wrong-class logit of each sample: pylucid's amax over dim 1
    return clamp(1.0 + amax(wrong, 1) - correct, min=0.0).mean()


def train(steps: int = 100, lr: float = 0.05, seed: int = 0, reference: bool = False,
          log_every: int = 10, verbose: bool = True, compile: bool = False) -> Dict[str, Any]:
    """Trains the MLP; returns the final loss, the training accuracy and the
    losses logged. ``reference`` uses torch.amax and torch.clamp instead;
    ``compile`` runs the loss under torch.compile(fullgraph=True)."""
    amax: Callable[..., torch.Tensor] = torch.amax if reference else pt.amax
    clamp: Callable[..., torch.Tensor] = torch.clamp if reference else pt.clamp
    x, y = make_data(seed=seed)
    torch.manual_seed(seed)
    model = torch.nn.ModuleList([torch.nn.Linear(2, 32), torch.nn.Linear(32, 3)])
    opt = torch.optim.Adam(model.parameters(), lr=lr)

    def forward(inp: torch.Tensor) -> torch.Tensor:
        h = clamp(model[0](inp), min=0.0)  # a ReLU by pylucid's clamp
        return model[1](h)

    def loss_of(inp: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return hinge_loss(forward(inp), target, amax, clamp)

    step_loss = torch.compile(loss_of, fullgraph=True) if compile else loss_of
    losses = []
    for step in range(steps + 1):
        opt.zero_grad()
        loss = step_loss(x, y)
        if step % log_every == 0 or step == steps:
            losses.append(loss.item())
            if verbose:
                print("step %4d  hinge loss %.6f" % (step, loss.item()))
        if step == steps:
            break
        loss.backward()
        opt.step()
    with torch.no_grad():
        acc = (forward(x).argmax(1) == y).double().mean().item()
    return {"loss": losses[-1], "accuracy": acc, "losses": losses}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reference", action="store_true", help="torch.amax/torch.clamp instead of pylucid's")
    ap.add_argument("--compile", action="store_true", help="the loss under torch.compile(fullgraph=True)")
    args = ap.parse_args(argv)
    out = train(args.steps, args.lr, args.seed, args.reference, compile=args.compile)
    print("final hinge loss %.6f, training accuracy %.3f (%s)"
          % (out["loss"], out["accuracy"], "torch ops" if args.reference else "pylucid.torch ops"))
    print("note: " + TIES)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
