"""A closed-form weighted ridge regression usable as Captum's Lime surrogate.

Captum's default Lime/KernelShap surrogates need scikit-learn, which is not a
dependency of captum-prxai. :class:`TorchRidge` implements Captum's
:class:`captum._utils.models.model.Model` interface in pure torch.
"""

from __future__ import annotations

from typing import Dict, Optional

import torch
from captum._utils.models.model import Model
from torch import Tensor
from torch.utils.data import DataLoader


class TorchRidge(Model):
    r"""Weighted least squares with an L2 penalty, solved in closed form.

    Minimises :math:`\sum_i w_i (y_i - x_i^\top \beta - b)^2 + \lambda \|\beta\|^2`
    (the intercept is not penalised). ``alpha=0`` gives ordinary weighted
    least squares, as KernelSHAP uses (a tiny jitter keeps it solvable).

    Args:
        alpha: L2 penalty :math:`\lambda`.
    """

    def __init__(self, alpha: float = 1e-3) -> None:
        self.alpha = float(alpha)
        self.weight: Optional[Tensor] = None
        self.bias: Optional[Tensor] = None

    def fit(self, train_data: DataLoader, **kwargs: object) -> Dict[str, float]:
        xs, ys, ws = [], [], []
        for batch in train_data:
            x, y = batch[0], batch[1]
            xs.append(x.reshape(x.shape[0], -1).double())
            ys.append(y.reshape(y.shape[0], -1).double())
            ws.append(batch[2].reshape(-1).double() if len(batch) > 2
                      else torch.ones(x.shape[0], dtype=torch.float64, device=x.device))
        x = torch.cat(xs)
        y = torch.cat(ys)
        w = torch.cat(ws).clamp_min(0)
        design = torch.cat([x, torch.ones(x.shape[0], 1, dtype=x.dtype, device=x.device)], dim=1)
        wd = design * w.unsqueeze(1)
        gram = design.T @ wd
        penalty = torch.full((design.shape[1],), max(self.alpha, 1e-8), dtype=x.dtype, device=x.device)
        penalty[-1] = 1e-8
        gram = gram + torch.diag(penalty)
        coef = torch.linalg.solve(gram, wd.T @ y)  # (F + 1, outputs)
        self.weight = coef[:-1].T.float()  # (outputs, F)
        self.bias = coef[-1].float()
        return {"n_samples": float(x.shape[0])}

    def representation(self) -> Tensor:
        if self.weight is None:
            raise RuntimeError("TorchRidge.fit must be called before representation().")
        return self.weight

    def __call__(self, x: Tensor) -> Tensor:  # type: ignore[override]
        if self.weight is None or self.bias is None:
            raise RuntimeError("TorchRidge.fit must be called before predicting.")
        return x.reshape(x.shape[0], -1).float() @ self.weight.T + self.bias
