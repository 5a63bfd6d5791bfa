"""The removal-metric settings of a benchmark run, in one object.

The runner computes the metrics with them, the ablation passes them through,
the report describes them, and the cache key includes them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Dict, Mapping, Optional, Tuple

from captum_prxai.exceptions import PRXAIError
from captum_prxai.metrics import ERASER_BINS

__all__ = ["MetricSettings"]


@dataclass
class MetricSettings:
    """How tokens are removed and which removal metrics are computed
    (:func:`captum_prxai.metrics.evaluate_faithfulness`; DeYoung et al., "ERASER: A Benchmark to Evaluate
    Rationalized NLP Models", ACL 2020).

    Attributes:
        mode: Token removal, ``"delete"`` (ERASER) or ``"replace"``.
        replacement: ``"mask"`` or ``"pad"``: the token used by ``"replace"``.
        bins: Comprehensiveness / sufficiency removal fractions, each in ``(0, 1]``.
        steps: Deletion-curve steps (at least 1).
        log_odds_fraction: Fraction removed for log-odds, in ``(0, 1]``.
        accuracy_fraction: Fraction removed for accuracy after removal, in ``(0, 1]``.
    """

    mode: str = "delete"
    replacement: str = "mask"
    bins: Tuple[float, ...] = ERASER_BINS
    steps: int = 10
    log_odds_fraction: float = 0.2
    accuracy_fraction: float = 0.2

    def validate(self) -> None:
        """Raise :class:`~captum_prxai.exceptions.PRXAIError` for a setting no metric can use."""
        if self.mode not in ("delete", "replace"):
            raise PRXAIError(f'mode must be "delete" or "replace", got {self.mode!r}.')
        if self.replacement not in ("mask", "pad"):
            raise PRXAIError(f'replacement must be "mask" or "pad", got {self.replacement!r}.')
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 1:
            raise PRXAIError(f"steps (deletion-curve steps) must be a whole number of at least 1, got {self.steps!r}.")
        if not self.bins or any(not 0 < float(b) <= 1 for b in self.bins):
            raise PRXAIError(f"bins must be removal fractions in (0, 1], got {tuple(self.bins)!r}.")
        for name in ("log_odds_fraction", "accuracy_fraction"):
            value = getattr(self, name)
            if not 0 < float(value) <= 1:
                raise PRXAIError(f"{name} must be a fraction in (0, 1], got {value!r}.")

    def metric_fields(self) -> Dict[str, Any]:
        """The settings as plain JSON values (``bins`` as a list); ``replacement`` only where it is used."""
        out = {f.name: getattr(self, f.name) for f in fields(MetricSettings)}
        out["bins"] = [float(b) for b in self.bins]
        if self.mode != "replace":
            out["replacement"] = None
        return out

    def replacement_id(self, mask_token_id: Optional[int], pad_token_id: int) -> Optional[int]:
        """The id that replaces removed tokens (``None`` in ``"delete"`` mode).

        Raises:
            PRXAIError: ``replacement="mask"`` with a tokenizer that has no ``[MASK]``.
        """
        if self.mode != "replace":
            return None
        if self.replacement == "pad":
            return pad_token_id
        if mask_token_id is None:
            raise PRXAIError('the tokenizer has no [MASK] token; use replacement="pad" or mode="delete".')
        return int(mask_token_id)

    def metric_kwargs(self, mask_token_id: Optional[int], pad_token_id: int, batch_size: int) -> Dict[str, Any]:
        """Keyword arguments of :func:`~captum_prxai.metrics.evaluate_faithfulness` for these settings."""
        return {"bins": tuple(self.bins), "steps": self.steps, "log_odds_fraction": self.log_odds_fraction,
                "accuracy_fraction": self.accuracy_fraction, "mode": self.mode,
                "replacement_id": self.replacement_id(mask_token_id, pad_token_id), "pad_token_id": pad_token_id,
                "batch_size": batch_size}

    def metrics_only(self) -> "MetricSettings":
        """A plain :class:`MetricSettings` with these values (drops the fields of subclasses)."""
        return MetricSettings(**{f.name: getattr(self, f.name) for f in fields(MetricSettings)})

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> "MetricSettings":
        """Read the settings back from a ``summary.json`` ``meta`` (missing keys: the defaults)."""
        names = {f.name for f in fields(MetricSettings)}
        values = {k: v for k, v in data.items() if k in names and v is not None}
        if "bins" in values:
            values["bins"] = tuple(values["bins"])
        return MetricSettings(**values)

    def as_dict(self) -> Dict[str, Any]:
        """Every field (subclasses' too) as plain values."""
        out = asdict(self)
        out["bins"] = [float(b) for b in self.bins]
        return out
