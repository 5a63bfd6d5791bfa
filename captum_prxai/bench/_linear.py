"""Moved to :mod:`captum_prxai.methods._linear` (re-exported here)."""

from captum_prxai.methods._linear import TorchRidge  # noqa: F401

__all__ = ["TorchRidge"]
