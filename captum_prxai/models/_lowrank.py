"""Low-rank adaptation (LoRA) of linear layers, without external dependencies.

During training, selected ``nn.Linear`` layers are wrapped so that their output
is ``W x + b + s * B (A x)`` with the original ``W, b`` frozen and the small
factors ``A (r x in)``, ``B (out x r)`` trained, ``s = alpha / r`` (Hu et al.,
2022, "LoRA: Low-Rank Adaptation of Large Language Models", ICLR). After
training, the update ``s * B A`` is merged into ``W`` so the model is again a
plain transformers model (eager attention, hooks, Captum: nothing changes).

The adapter file stores the factors (and any fully trained tensors) in
safetensors; :func:`apply_adapter` merges them onto a freshly loaded base
model.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
from torch import nn

#: Suffixes of ``nn.Linear`` module names adapted by default (BERT and MPNet encoders, Llama-style decoders).
DEFAULT_TARGETS = (
    "attention.self.query",
    "attention.self.key",
    "attention.self.value",
    "attention.output.dense",
    "intermediate.dense",
    "output.dense",
    # MPNet names its attention projections q, k, v, o
    "attention.attn.q",
    "attention.attn.k",
    "attention.attn.v",
    "attention.attn.o",
    # Llama-style decoders (SmolLM2)
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn.o_proj",
    "mlp.gate_proj",
    "mlp.up_proj",
    "mlp.down_proj",
)


class LowRankLinear(nn.Module):
    """``nn.Linear`` plus a trainable low-rank update (the base stays frozen)."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float, dropout: float = 0.0):
        super().__init__()
        self.base = base
        self.rank = rank
        self.scale = alpha / rank
        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        for p in self.base.parameters():
            p.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + (self.dropout(x) @ self.lora_A.t() @ self.lora_B.t()) * self.scale

    def delta(self) -> torch.Tensor:
        return (self.lora_B @ self.lora_A) * self.scale


def _set_module(root: nn.Module, name: str, module: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    parent = root.get_submodule(parent_name) if parent_name else root
    setattr(parent, child, module)


def add_lowrank(
    model: nn.Module,
    rank: int,
    alpha: float,
    targets: tuple[str, ...] = DEFAULT_TARGETS,
    dropout: float = 0.0,
    train_fully: tuple[str, ...] = ("classifier", "pooler", "score"),
) -> list[str]:
    """Freeze ``model`` and wrap target linears with :class:`LowRankLinear`.

    Parameters whose name starts with (or contains ``.``+) an entry of
    ``train_fully`` stay trainable in full.

    Returns:
        Names of the wrapped modules.
    """
    for p in model.parameters():
        p.requires_grad_(False)
    wrapped = []
    for name, module in list(model.named_modules()):
        if isinstance(module, nn.Linear) and any(name.endswith(t) for t in targets):
            if any(_matches(name, f) for f in train_fully):
                continue
            _set_module(model, name, LowRankLinear(module, rank, alpha, dropout))
            wrapped.append(name)
    for pname, p in model.named_parameters():
        if any(_matches(pname, f) for f in train_fully):
            p.requires_grad_(True)
    return wrapped


def _matches(name: str, prefix: str) -> bool:
    return name.startswith(prefix + ".") or f".{prefix}." in name or name == prefix


def fully_trained_names(model: nn.Module, train_fully=("classifier", "pooler", "score")) -> list[str]:
    return [n for n, _ in model.named_parameters() if any(_matches(n, f) for f in train_fully)
            and ".lora_" not in n and ".base." not in n]


def merge_lowrank(model: nn.Module) -> None:
    """Replace every :class:`LowRankLinear` by its base linear with the update merged in."""
    for name, module in list(model.named_modules()):
        if isinstance(module, LowRankLinear):
            with torch.no_grad():
                module.base.weight += module.delta().to(module.base.weight.dtype)
            _set_module(model, name, module.base)


def adapter_state(model: nn.Module, dtype: torch.dtype = torch.float16) -> dict[str, torch.Tensor]:
    """Tensors that turn the base model into the trained one (before merging).

    Low-rank factors are stored as ``<module>.lora_A`` / ``<module>.lora_B``
    (with the scale folded into ``B``); fully trained tensors under their own name.
    """
    state: dict[str, torch.Tensor] = {}
    for name, module in model.named_modules():
        if isinstance(module, LowRankLinear):
            state[f"{name}.lora_A"] = module.lora_A.detach().to(dtype).contiguous()
            state[f"{name}.lora_B"] = (module.lora_B.detach() * module.scale).to(dtype).contiguous()
    for name in fully_trained_names(model):
        state[name] = model.get_parameter(name).detach().to(dtype).contiguous()
    return state


def save_adapter(model: nn.Module, path: Path, metadata: dict) -> None:
    from safetensors.torch import save_file

    state = adapter_state(model)
    save_file(state, str(path), metadata={"captum_prxai": json.dumps(metadata)})


def apply_adapter(model: nn.Module, path: Path) -> dict:
    """Merge an adapter saved by :func:`save_adapter` into ``model`` (in place).

    Returns:
        The metadata stored with the adapter.
    """
    from safetensors import safe_open

    params = dict(model.named_parameters())
    with safe_open(str(path), framework="pt") as fh:
        meta = json.loads((fh.metadata() or {}).get("captum_prxai", "{}"))
        keys = list(fh.keys())
        with torch.no_grad():
            for key in keys:
                if key.endswith(".lora_A"):
                    mod = key[: -len(".lora_A")]
                    a = fh.get_tensor(key).float()
                    b = fh.get_tensor(mod + ".lora_B").float()
                    w = params[mod + ".weight"]
                    w += (b @ a).to(w.dtype)
                elif key.endswith(".lora_B"):
                    continue
                else:
                    if key not in params:
                        raise KeyError(f"adapter tensor {key!r} has no match in the model")
                    params[key].copy_(fh.get_tensor(key).to(params[key].dtype))
    return meta
