"""Sequence classifiers for PR-XAI: the embedded default model, training, loading.

Example::

    from captum_prxai.models import load_default
    model, tokenizer = load_default()   # MiniLM-L6 fine-tuned on movie-sentences

    from captum_prxai.models import load_decoder_classifier
    clf = load_decoder_classifier("smollm2")   # zero-shot decoder, forward -> (B, 2) logits
    logits = clf(**clf.encode(["A gorgeous, witty film."]))
"""

from captum_prxai._lazy import lazy_exports
from captum_prxai.models._cpu import PINNED_ENV
from captum_prxai.models.load import ENCODERS, encoder_path, label_names, load_default, load_model
from captum_prxai.models.train import TrainConfig, TrainResult, evaluate, train_classifier

__all__ = [
    "ENCODERS",
    "PINNED_ENV",
    "LabelWordClassifier",
    "load_decoder_classifier",
    "TrainConfig",
    "TrainResult",
    "encoder_path",
    "evaluate",
    "label_names",
    "load_default",
    "load_model",
    "train_classifier",
]

# decoder support imports torch at module level: load it only when asked for
__getattr__, __dir__ = lazy_exports(
    __name__, {name: ".decoder" for name in ("LabelWordClassifier", "load_decoder_classifier", "load_decoder")}
)
