"""Faithfulness metrics for token attributions (pure torch).

* :mod:`~captum_prxai.metrics.masking`: remove the top-k% tokens by deletion
  or replacement, never touching special tokens or padding.
* :mod:`~captum_prxai.metrics.faithfulness`: ERASER comprehensiveness and
  sufficiency, deletion curves and AOPC, log-odds, accuracy after removal.
* :mod:`~captum_prxai.metrics.perturbations`: token perturbations for
  :func:`captum.metrics.infidelity` and :func:`captum.metrics.sensitivity_max`.
* :mod:`~captum_prxai.metrics.stats`: mean ± standard error and bootstrap CIs.
* :mod:`~captum_prxai.metrics.soft`: soft comprehensiveness and sufficiency
  (Bernoulli masks on the embeddings, Zhao & Aletras 2023).
* :mod:`~captum_prxai.metrics.normalized_aopc`: AOPC between each example's
  own bounds (Edin et al. 2024).
* :mod:`~captum_prxai.metrics.f_fidelity`: removal measured on a copy
  fine-tuned on random removals (Zheng et al. 2025).
* :mod:`~captum_prxai.metrics.replacement`: the replacement token of
  ``mode="replace"`` removal (``[MASK]`` for encoders, a space for decoders).

See ``docs/metrics.md`` for the protocol.
"""

from captum_prxai.metrics.faithfulness import (
    ERASER_BINS,
    BinnedScore,
    DeletionCurve,
    accuracy_after_removal,
    aopc,
    aopc_from_curve,
    comprehensiveness,
    deletion_curve,
    evaluate_faithfulness,
    log_odds,
    sufficiency,
)
from captum_prxai.metrics.f_fidelity import F_FIDELITY_FRACTIONS, FFidelity, f_fidelity, random_mask_finetune
from captum_prxai.metrics.masking import (
    num_tokens_to_remove,
    protect_positions,
    real_token_mask,
    remove_tokens,
    remove_top_k,
    select_tokens,
)
from captum_prxai.metrics.perturbations import (
    probability_forward,
    random_token_selection,
    token_explanation_func,
    token_infidelity_perturb_func,
    token_sensitivity_perturb_func,
)
from captum_prxai.metrics.normalized_aopc import NormalizedAOPC, normalized_aopc
from captum_prxai.metrics.replacement import replacement_token_id
from captum_prxai.metrics.soft import normalized_importance, soft_comprehensiveness, soft_sufficiency
from captum_prxai.metrics.stats import bootstrap_ci, format_mean_sem, mean_sem

__all__ = [
    "accuracy_after_removal",
    "aopc",
    "aopc_from_curve",
    "BinnedScore",
    "bootstrap_ci",
    "comprehensiveness",
    "deletion_curve",
    "DeletionCurve",
    "ERASER_BINS",
    "evaluate_faithfulness",
    "f_fidelity",
    "F_FIDELITY_FRACTIONS",
    "FFidelity",
    "format_mean_sem",
    "log_odds",
    "mean_sem",
    "normalized_aopc",
    "normalized_importance",
    "NormalizedAOPC",
    "num_tokens_to_remove",
    "probability_forward",
    "protect_positions",
    "random_mask_finetune",
    "random_token_selection",
    "real_token_mask",
    "remove_tokens",
    "remove_top_k",
    "replacement_token_id",
    "select_tokens",
    "soft_comprehensiveness",
    "soft_sufficiency",
    "sufficiency",
    "token_explanation_func",
    "token_infidelity_perturb_func",
    "token_sensitivity_perturb_func",
]
