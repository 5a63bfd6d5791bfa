r"""The recipe: the measured default of PR-XAI for a model, as a complete :class:`~captum_prxai.GraphSpec`.

:class:`~captum_prxai.graph.spec.GraphSpec` is the algorithm; its own defaults are the paper's PR-AG.
:func:`recommended_spec` is the one place where the choices measured on the benchmark's tune halves live;
:class:`~captum_prxai.PageRankAttribution` calls it, when it runs, for every option left to ``"auto"``.
docs/defaults.md gives each choice's evidence, and docs/research/default_search.md the whole search.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

from torch import nn

from captum_prxai.exceptions import PRXAIError
from captum_prxai.graph.spec import GraphSpec, has_negative_walk

__all__ = ["AUTO", "DEEP_ENCODER_LAYERS", "GENERATION_CHOICES", "TASKS", "recommended_spec"]

#: The value of an option that :func:`recommended_spec` fills in.
AUTO = "auto"
#: Encoders with at least this many attention layers get the deep encoders' choices.
DEEP_ENCODER_LAYERS = 12
#: What the explained output is: a class (the classification benchmark's choices) or the tokens a decoder
#: generates (:class:`~captum_prxai.llm.LLMGraphAttribution`'s rows; the generation benchmark's choices).
TASKS = ("classification", "generation")
#: The generation default's choices where they differ from the decoders' classification ones: PR-AG's one walk
#: on ``(A ⊙ dA)⁺``, chosen by the worst-case rule on the generation benchmark's tune halves (SmolLM2; cloze,
#: narrative and chat prompts) and checked on its held-out halves (docs/defaults.md, "Generation").
GENERATION_CHOICES: dict = {"edge_weight": "attention_gradient", "walks": "positive"}


def recommended_spec(model: Union[nn.Module, Sequence[nn.Module], None] = None, *, causal: Optional[bool] = None,
                     depth: Optional[int] = None, task: str = "classification", **options: Any) -> GraphSpec:
    r"""The measured default of PR-XAI for ``model``: a complete :class:`~captum_prxai.GraphSpec`.

    The choices depend on two facts of the model: whether its attention is causal (a decoder) and, for
    encoders, its depth. Each was chosen by the worst case over the benchmark's tune halves and checked on
    its held-out halves (docs/defaults.md):

    ==================  ===========================  ==============================  =================
    option              encoders (< 12 layers)       encoders (12+ layers)           decoders
    ==================  ===========================  ==============================  =================
    edge_weight         ``(A^γ ⊙ dA)⁺`` (PR-TAG)     ``(A^γ ⊙ dA)⁺``                 ``(A^γ ⊙ dA)⁺``
    attention_power γ   0.5                          0.25                            0.5
    walks               both (``s⁺ − λ s⁻``)         both                            both
    negative_weight λ   0.25                         0.25                            1
    walk_gate           none                         0.5                             none
    hub_power p         0.5                          0.5                             0
    objective           log-probability              log-probability                 log-probability
    propagation         conservative (CP-LRP)        conservative (CP-LRP)           gradient
    relevance_weight w  1                            1                               0
    ==================  ===========================  ==============================  =================

    The rows of a decoder's generation (``task="generation"``) take PR-AG's edges and one walk
    (:data:`GENERATION_CHOICES`), the decoders' column for the rest.

    Options given explicitly are kept, and the rules fill the rest consistently with them: the negative
    walk only where the edges and graph have one (:func:`~captum_prxai.graph.spec.has_negative_walk`), no
    hub weight on the layered graph, no relevance weight on attention-only edges (PR-A needs no backward
    pass). Every other field keeps :class:`~captum_prxai.GraphSpec`'s default (damping 0.7, teleport to the
    explained token).

    Args:
        model (nn.Module or sequence of nn.Module, optional): The model, or its attention layers
            (:func:`captum_prxai.attention_layers`). Without it, an encoder under 12 layers.
        causal (bool, optional): Whether the attention is causal; overrides what ``model`` declares.
        depth (int, optional): The number of attention layers; overrides ``model``'s.
        task (str): ``"classification"`` (default) or ``"generation"`` (:data:`TASKS`): the rows of a
            decoder's generation (:class:`~captum_prxai.llm.LLMGraphAttribution`) take
            :data:`GENERATION_CHOICES` where they differ from the decoders' column above.
        **options: :class:`~captum_prxai.GraphSpec` fields to fix; ``"auto"`` leaves a field to the rules.

    Returns:
        GraphSpec: the complete, checked spec.

    Example::

        >>> spec = recommended_spec(model)                  # what PageRankAttribution() runs on model
        >>> spec = recommended_spec(model, walks="positive")  # the same, with one walk

    References:
        B. Azarkhalili, L. Li, M. W. Libbrecht. *PR-XAI: PageRank-Based Feature Attribution for
        Transformers.* ACL 2026.
        A. Ali et al. *XAI for Transformers: Better Explanations through Conservative Propagation.* ICML 2022.
    """
    from captum_prxai.capture import layers_are_causal, model_depth, model_is_causal

    if task not in TASKS:
        raise PRXAIError(f"task must be one of {', '.join(map(repr, TASKS))}, got {task!r}.")
    fields = GraphSpec.__dataclass_fields__
    unknown = sorted(set(options) - {name for name in fields if not name.startswith("_")})
    if unknown:
        raise PRXAIError(f"unknown option(s) {', '.join(map(repr, unknown))}; the options are the fields of "
                         f"GraphSpec: {', '.join(n for n in fields if not n.startswith('_'))}.")
    if isinstance(model, nn.Module):
        found_causal, found_depth = model_is_causal(model), model_depth(model)
        if found_depth == 0:  # an attention module itself, not a model
            found_causal, found_depth = layers_are_causal([model]), 1
    elif model is not None:
        layers = list(model)
        found_causal, found_depth = layers_are_causal(layers), len(layers)
    else:
        found_causal, found_depth = False, 0
    causal = found_causal if causal is None else bool(causal)
    depth = found_depth if depth is None else int(depth)
    deep_encoder = not causal and depth >= DEEP_ENCODER_LAYERS

    given = {name: value for name, value in options.items() if not _is_auto(value)}

    generation = task == "generation"

    def pick(name: str, recommended: Any) -> Any:
        if name in given:
            return given[name]
        return GENERATION_CHOICES.get(name, recommended) if generation else recommended

    edge_weight = pick("edge_weight", "tempered_attention_gradient")
    graph = pick("graph", GraphSpec.graph)
    signed = pick("signed", GraphSpec.signed)
    chosen = {
        "edge_weight": edge_weight,
        "graph": graph,
        "signed": signed,
        "attention_power": pick("attention_power", 0.25 if deep_encoder else 0.5),
        "walks": pick("walks", "both" if has_negative_walk(edge_weight, graph, signed) else "positive"),
        "negative_weight": pick("negative_weight", 1.0 if causal else 0.25),
        "walk_gate": pick("walk_gate", 0.5 if deep_encoder else None),
        "hub_power": pick("hub_power", 0.0 if causal or graph != "token" else 0.5),
        "objective": pick("objective", "log_probability"),
        "propagation": pick("propagation", "gradient" if causal else "conservative"),
        "relevance_weight": pick("relevance_weight", 0.0 if causal or _is_attention(edge_weight) else 1.0),
    }
    return GraphSpec(**{**given, **chosen})


def _is_auto(value: Any) -> bool:
    return isinstance(value, str) and value == AUTO


def _is_attention(edge_weight: Any) -> bool:
    return isinstance(edge_weight, str) and edge_weight == "attention"
