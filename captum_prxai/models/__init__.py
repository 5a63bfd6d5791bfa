"""Sequence classifiers for PR-XAI: the embedded default model, training, loading.

Example::

    from captum_prxai.models import load_default
    model, tokenizer = load_default()   # MiniLM-L6 fine-tuned on movie-sentences
"""

from captum_prxai.models.load import ENCODERS, encoder_path, load_default, load_model
from captum_prxai.models.train import TrainConfig, TrainResult, evaluate, train_classifier

__all__ = [
    "ENCODERS",
    "TrainConfig",
    "TrainResult",
    "encoder_path",
    "evaluate",
    "load_default",
    "load_model",
    "train_classifier",
]
