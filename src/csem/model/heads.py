"""Feed-forward regression head (COMET's ``FeedForward`` estimator: Rei et al. 2020, ``comet/modules/feedforward.py``).

``Linear -> activation -> Dropout`` for each hidden size, then a final ``Linear`` to ``out_dim``
outputs (1 for regression, the number of star classes for the cross-entropy loss).
"""

from __future__ import annotations

from torch import Tensor, nn

from csem.errors import InputError

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "gelu": nn.GELU, "sigmoid": nn.Sigmoid}


class FeedForward(nn.Module):
    """Feed-forward head.

    Args:
        in_dim: feature width (e.g. ``6 * d`` for Eq. 9).
        hidden_sizes: widths of the hidden layers (COMET default ``[3072, 1024]``).
        out_dim: outputs per input row.
        activation: ``tanh`` | ``relu`` | ``gelu`` | ``sigmoid``.
        dropout: dropout probability after each hidden layer.

    Shapes: ``forward([N, in_dim]) -> [N, out_dim]``.

    Raises:
        ValueError: unknown activation.
    """

    def __init__(self, in_dim: int, hidden_sizes: list[int], out_dim: int = 1, activation: str = "tanh",
                 dropout: float = 0.1):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise InputError(f"unknown activation '{activation}'; choose from {sorted(ACTIVATIONS)}")
        layers: list[nn.Module] = []
        width = in_dim
        for h in hidden_sizes:
            layers += [nn.Linear(width, h), ACTIVATIONS[activation](), nn.Dropout(dropout)]
            width = h
        layers.append(nn.Linear(width, out_dim))
        self.ff = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        return self.ff(x)
