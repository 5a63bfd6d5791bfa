"""The explorer inside a Jupyter notebook: :func:`show` serves it in a background thread and embeds it.

As Captum Insights did, the page is an iframe to a local server, so it works
in any notebook front end that runs in a browser on the same machine::

    from captum_prxai.explorer import show
    from captum_prxai.models import load_default

    model, tokenizer = load_default()
    explorer = show(model, tokenizer, {"mine": [("a gripping film", 1), ("a dull plot", 0)]})
    ...
    explorer.stop()
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from captum_prxai.exceptions import PRXAIError

__all__ = ["show"]


def show(model: Any, tokenizer: Any, datasets: Optional[Mapping[str, Any]] = None, *, height: int = 820,
         port: int = 0, display: bool = True, **options: Any) -> Any:
    """Start the explorer on a free loopback port and show it in the notebook.

    Args:
        model: The classifier (see :func:`~captum_prxai.explorer.create_app`).
        tokenizer: Its tokenizer.
        datasets: ``name -> dataset``: a DataFrame with ``text`` and ``label``
            columns, a list of ``(text, label)`` pairs, or a dataset object;
            default: the package's offline datasets.
        height: Height of the embedded page, in pixels.
        port: Port on ``127.0.0.1`` (0: any free port).
        display: Embed the page with IPython (``False``: only start the server).
        **options: Passed to :func:`~captum_prxai.explorer.create_app`
            (``model_name``, ``compare``, ``forward_func``, ``memory_budget_mb`` ...).

    Returns:
        The running :class:`~captum_prxai.explorer.ServerThread` (``.url``, ``.stop()``).

    Raises:
        PRXAIError: IPython is not installed and ``display`` is true.
    """
    from captum_prxai.explorer.app import create_app
    from captum_prxai.explorer.server import ServerThread

    if display:
        try:
            from IPython.display import IFrame, display as show_html
        except ImportError:
            raise PRXAIError("show() embeds the explorer with IPython, which is not installed; "
                             "pip install ipython, or pass display=False and open server.url.") from None
    if int(height) < 100:
        raise PRXAIError(f"height must be at least 100 pixels, got {height}.")
    server = ServerThread(create_app(model, tokenizer, datasets, **options), host="127.0.0.1", port=port).start()
    if display:
        show_html(IFrame(server.url, width="100%", height=int(height)))
    return server
