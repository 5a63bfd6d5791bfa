"""The explorer's method parameters: which knobs each method has, their ranges, and validation.

The methods themselves come from the shared method registry
(:data:`captum_prxai.methods.METHODS`); this module only says which of
the page's parameter fields apply to which method and turns them into the
per-method ``options`` of :class:`captum_prxai.methods.MethodContext`.
Only the parameters a method uses go into its cache key, so changing the
IG steps does not invalidate cached PR-G results.

Validation is strict: a number field takes a JSON number only (``true`` or
``"2.7"`` are refused, not read as 1 or 2), an integer field an integral
number, and neither takes ``NaN`` or ``Infinity``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

from captum_prxai.attr.pagerank_attribution import DEFAULT_DAMPING
from captum_prxai.exceptions import PRXAIError

__all__ = ["Param", "PARAMS", "check_params", "method_param_names", "method_options", "param_specs",
           "check_flag"]


@dataclass(frozen=True)
class Param:
    """One field of the parameter panel.

    Attributes:
        key: Name in requests (``params: {key: value}``).
        label: Shown in the page.
        kind: ``"float"``, ``"int"`` or ``"choice"``.
        default: Value used when the request leaves it out (``None``: the
            method's own default).
        help: One line shown as a tooltip; says what the number counts.
        minimum: Smallest accepted value (numbers).
        maximum: Largest accepted value (numbers).
        choices: Accepted values (``"choice"``).
        option: Name of the keyword the method factory receives; an option
            starting with ``"context."`` sets a field of the method's
            :class:`~captum_prxai.methods.MethodContext` instead.
    """

    key: str
    label: str
    kind: str
    default: Any
    help: str
    minimum: Optional[float] = None
    maximum: Optional[float] = None
    choices: Tuple[str, ...] = ()
    option: str = ""

    def validate(self, value: Any) -> Any:
        """The value converted to the parameter's type, or :class:`PRXAIError`."""
        if value is None:
            return self.default
        if self.kind == "choice":
            if not isinstance(value, str) or value not in self.choices:
                raise PRXAIError(f"parameter {self.key!r} must be one of {', '.join(self.choices)}; "
                                 f"got {_show(value)}.")
            return value
        what = "an integer" if self.kind == "int" else "a number"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise PRXAIError(f"parameter {self.key!r} must be {what} (a JSON number, not a string or a "
                             f"boolean); got {_show(value)}.")
        if isinstance(value, float) and not math.isfinite(value):
            raise PRXAIError(f"parameter {self.key!r} must be a finite number; got {value!r}.")
        if self.kind == "int":
            if isinstance(value, float) and not value.is_integer():
                raise PRXAIError(f"parameter {self.key!r} must be an integer; got {value!r}.")
            number: Any = int(value)
        else:
            number = float(value)
        if not (self.minimum <= number <= self.maximum):  # type: ignore[operator]
            raise PRXAIError(
                f"parameter {self.key!r} must be between {self.minimum:g} and {self.maximum:g}; got {_show(value)}."
            )
        return number

    def as_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"key": self.key, "label": self.label, "kind": self.kind,
                               "default": self.default, "help": self.help}
        if self.kind == "choice":
            out["choices"] = list(self.choices)
        else:
            out["min"], out["max"] = self.minimum, self.maximum
        return out


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_flag(data: Mapping[str, Any], key: str, default: bool = False) -> bool:
    """A boolean field of a request: JSON ``true`` / ``false`` only (``"false"`` is refused, not read as true)."""
    value = data.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise PRXAIError(f"{key!r} must be true or false; got {_show(value)}.")
    return value


#: Every field of the parameter panel, in display order.
PARAMS: Dict[str, Param] = {
    p.key: p
    for p in [
        Param("damping", "PageRank damping", "float", DEFAULT_DAMPING,
              "probability of following an edge instead of teleporting (PR-A, PR-G, PR-AG)",
              0.0, 0.99, option="damping"),
        Param("teleport", "Teleport", "choice", "target",
              "PageRank teleport: to the explained token ([CLS]) or uniform over tokens",
              choices=("target", "uniform"), option="teleport"),
        Param("graph", "Graph", "choice", "token",
              "token: one node per token, layers summed; layered: one node per token and layer",
              choices=("token", "layered"), option="graph"),
        Param("head_reduction", "Heads", "choice", "mean",
              "how the attention heads of a layer are combined (attention-graph methods)",
              choices=("mean", "sum", "max"), option="head_reduction"),
        Param("walk_gate", "Walk gate", "float", None,
              "PR-XAI methods that walk both signs (the default): keep the positive walk alone on a text whose "
              "two walks' scores correlate above this (empty: the method's own for this model)", -1.0, 1.0,
              option="walk_gate"),
        Param("hub_power", "Hub weight", "float", None,
              "PR-XAI, token graph: weigh each walk's PageRank by its graph's global PageRank to this power, "
              "raising the tokens the whole graph routes its traffic to (empty: the method's own: the default's "
              "for this model, 0 for PR-A, PR-G, PR-AG and PR-TAG)", 0.0, 2.0, option="hub_power"),
        Param("ig_steps", "IG steps", "int", 50,
              "Integrated Gradients: integration steps; each step is one forward and one backward pass",
              1, 300, option="n_steps"),
        Param("ig_baseline", "IG baseline", "choice", "pad",
              "Integrated Gradients: the reference text, every real token replaced by [PAD] or by [MASK]",
              choices=("pad", "mask"), option="context.reference"),
        Param("window", "Occlusion window", "int", 3,
              "Occlusion: tokens hidden at once (sliding window, stride 1); one model evaluation per position",
              1, 16, option="sliding_window_shapes"),
        Param("permutations", "Shapley permutations", "int", None,
              "Shapley sampling: random token orders to average over (empty: 25); each costs one model "
              "evaluation per token, so 25 permutations of 400 tokens are 10,000 evaluations",
              1, 200, option="n_samples"),
        Param("samples", "Samples", "int", None,
              "KernelSHAP / LIME: perturbed copies of the text the surrogate is fitted on (empty: 200); "
              "one model evaluation each", 10, 2000, option="n_samples"),
    ]
}

_PR = ("damping", "teleport", "graph", "head_reduction", "hub_power")
_BY_NAME: Dict[str, Tuple[str, ...]] = {
    "ig": ("ig_steps", "ig_baseline"),
    "occlusion": ("window",),
    "shapley": ("permutations",),
    "kernel-shap": ("samples",),
    "lime": ("samples",),
}
_BY_FAMILY: Dict[str, Tuple[str, ...]] = {
    "pr-xai": _PR,
    "attention": ("head_reduction",),
}


def method_param_names(name: str, family: str) -> Tuple[str, ...]:
    """Keys of :data:`PARAMS` that apply to a registered method (``walk_gate``: PR-XAI methods that walk both signs)."""
    if name in _BY_NAME:
        return _BY_NAME[name]
    names = _BY_FAMILY.get(family, ())
    if family == "pr-xai" and _walks_both(name):
        names += ("walk_gate",)
    return names


def _walks_both(name: str) -> bool:
    """Whether the registered PR-XAI method ``name`` may walk both signs (its ``walks`` is ``"both"`` or ``"auto"``).

    ``"auto"`` (the default method) resolves per model, and walks both signs
    on the models it was measured on, so its gate is offered too.
    """
    from captum_prxai.methods import METHODS

    method = METHODS.get(name)
    defaults = method.defaults() if method is not None and method.defaults is not None else {}
    return defaults.get("walks") in ("both", "auto")


def method_options(name: str, family: str, params: Mapping[str, Any]
                   ) -> Tuple[Dict[str, Any], Dict[str, Any], Dict[str, Any]]:
    """Validate the page's parameters for one method.

    Args:
        name: Registered method name.
        family: Its family (``"pr-xai"``, ``"attention"`` ...).
        params: All parameters sent by the page (unrelated keys are ignored).

    Returns:
        ``(used, options, context)``: the validated values of the parameters
        this method uses (its cache key; ``None`` values dropped), the keyword
        options for its factory, and the
        :class:`~captum_prxai.methods.MethodContext` fields it sets
        (``{"reference": "mask"}`` for IG's baseline).

    Raises:
        PRXAIError: A value of the wrong type or out of range.
    """
    used: Dict[str, Any] = {}
    options: Dict[str, Any] = {}
    context: Dict[str, Any] = {}
    for key in method_param_names(name, family):
        spec = PARAMS[key]
        value = spec.validate(params.get(key))
        if value is None:
            continue
        used[key] = value
        if spec.option.startswith("context."):
            context[spec.option[len("context."):]] = value
        else:
            options[spec.option] = (int(value),) if key == "window" else value
    return used, options, context


def check_params(params: Any) -> Dict[str, Any]:
    """The request's ``params`` object, with unknown keys and bad values refused."""
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise PRXAIError("'params' must be an object such as {\"damping\": 0.85, \"ig_steps\": 50}.")
    unknown = sorted(str(k) for k in set(params) - set(PARAMS))
    if unknown:
        raise PRXAIError(f"unknown parameter(s) {', '.join(k[:40] for k in unknown[:5])}; "
                         f"known: {', '.join(PARAMS)}.")
    for key, value in params.items():
        PARAMS[key].validate(value)
    return dict(params)


def param_specs() -> List[Dict[str, Any]]:
    """JSON description of :data:`PARAMS` for the page."""
    return [p.as_json() for p in PARAMS.values()]
