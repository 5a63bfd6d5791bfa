"""Faithfulness metrics for token attributions (pure torch).

* :mod:`~captum_prxai.metrics.masking`: remove the top-k% tokens by deletion
  or replacement, never touching special tokens or padding.
* :mod:`~captum_prxai.metrics.faithfulness`: ERASER comprehensiveness and
  sufficiency, deletion curves and AOPC, log-odds, accuracy after removal.
* :mod:`~captum_prxai.metrics.perturbations`: token perturbations for
  :func:`captum.metrics.infidelity` and :func:`captum.metrics.sensitivity_max`.
* :mod:`~captum_prxai.metrics.stats`: mean ± standard error and bootstrap CIs.

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
from captum_prxai.metrics.stats import bootstrap_ci, format_mean_sem, mean_sem

__all__ = [
    "ERASER_BINS",
    "BinnedScore",
    "DeletionCurve",
    "accuracy_after_removal",
    "aopc",
    "aopc_from_curve",
    "bootstrap_ci",
    "comprehensiveness",
    "deletion_curve",
    "evaluate_faithfulness",
    "format_mean_sem",
    "log_odds",
    "mean_sem",
    "num_tokens_to_remove",
    "probability_forward",
    "random_token_selection",
    "protect_positions",
    "real_token_mask",
    "remove_tokens",
    "remove_top_k",
    "select_tokens",
    "sufficiency",
    "token_explanation_func",
    "token_infidelity_perturb_func",
    "token_sensitivity_perturb_func",
]
