"""Visualisation of PR-XAI attributions.

* :mod:`captum_prxai.viz.html` -- HTML heatmaps and standalone comparison pages.
* :mod:`captum_prxai.viz.records` -- Captum ``VisualizationDataRecord`` for ``visualize_text``.
* :mod:`captum_prxai.viz.graph` -- the attention graph drawn with matplotlib.
* :mod:`captum_prxai.viz.curves` -- deletion / insertion curves.
* :mod:`captum_prxai.viz.terminal` -- ANSI-coloured token lines.
* :mod:`captum_prxai.viz.tokens` -- merging sub-word pieces back into words.
* :func:`display_max`, :func:`intensities`, :func:`is_signed` -- the colour scale every picture shares.

Sub-modules are imported lazily so that ``import captum_prxai.viz`` does not
import matplotlib or torch.
"""

from __future__ import annotations

from captum_prxai._lazy import lazy_exports

_EXPORTS = {
    "token_heatmap_html": ".html",
    "comparison_page": ".html",
    "STYLE": ".html",
    "to_visualization_records": ".records",
    "plot_attention_graph": ".graph",
    "attention_graph_svg": ".graph",
    "plot_deletion_curves": ".curves",
    "terminal_heatmap": ".terminal",
    "terminal_legend": ".terminal",
    "merge_subwords": ".tokens",
    # the colour scale every picture shares (which tokens set its maximum, each score's intensity)
    "display_max": "._colors",
    "intensities": "._colors",
    "is_signed": "._colors",
    "top_words": ".tokens",
}

__all__ = list(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
