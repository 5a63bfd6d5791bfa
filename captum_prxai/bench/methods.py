"""Moved: the method registry lives in :mod:`captum_prxai.methods` (shared by ``explain``, the explorer and
the benchmark). This module re-exports it for code written against the old place."""

from captum_prxai.methods import *  # noqa: F401,F403
from captum_prxai.methods import __all__  # noqa: F401
from captum_prxai.methods.builtin import (  # noqa: F401
    _embeddings,
    _opts,
    reference_ids,
    _token_feature_mask,
)
