"""A generation explanation as one standalone HTML page: a token x token view of ``token_attr``.

Rows are the generated tokens, columns the prompt's features; each cell is
coloured by its score, on the method's scale (:mod:`captum_prxai.viz._colors`:
diverging for signed methods, sequential from 0 for unsigned ones). Hovering a
row (or focusing it with the keyboard) highlights it and recolours the prompt
shown above the table by that row's scores, so its sources stand out. The page
has no external assets (inline CSS and a few lines of JavaScript), so it can be
mailed or archived as one file.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Optional, Sequence

from captum_prxai.viz import _colors
from captum_prxai.viz.html import escape
from captum_prxai.viz.tokens import display_token

__all__ = ["VIEW_SCRIPT", "VIEW_STYLE", "generation_html", "generation_view", "generation_view_html"]

#: The view's CSS (the standalone page inlines it; the explorer serves it).
VIEW_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.2em; } .meta { color: #555; font-size: 0.9em; }
.prompt { margin: 1em 0; line-height: 2.1; max-width: 70em; }
.prompt span { padding: 2px 3px; border-radius: 3px; margin-right: 1px; white-space: pre; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border: 1px solid #eee; padding: 2px 4px; text-align: center; white-space: pre; }
th.col { writing-mode: vertical-rl; transform: rotate(180deg); font-weight: normal; }
tr.row th { text-align: right; font-weight: normal; }
tr.row:hover, tr.row:focus, tr.row.active { outline: 2px solid #333; }
tr.row:focus { outline-offset: -2px; }
td { min-width: 1.6em; }
.legend { margin-top: 1em; font-size: 0.85em; color: #444; }
"""

#: The hover behaviour: hovering or focusing ``tr.row`` k recolours ``.prompt span`` by row k of the
#: ``#prxai-data`` JSON (the standalone page inlines it; the explorer serves it, CSP forbids inline scripts).
VIEW_SCRIPT = """
(function () {
  var data = JSON.parse(document.getElementById('prxai-data').textContent);
  var spans = document.querySelectorAll('.prompt span');
  var label = document.getElementById('row-label');
  function show(k) {
    document.querySelectorAll('tr.row').forEach(function (r) { r.classList.remove('active'); });
    var row = document.querySelector('tr.row[data-row="' + k + '"]');
    if (row) { row.classList.add('active'); }
    spans.forEach(function (s, j) {
      s.style.background = data.colors[k][j];
      s.style.color = data.text[k][j];
      s.title = data.scores[k][j];
    });
    label.textContent = 'Sources of ' + data.outputs[k] + ' (row ' + (k + 1) + '):';
  }
  document.querySelectorAll('tr.row').forEach(function (r) {
    var k = parseInt(r.getAttribute('data-row'), 10);
    r.addEventListener('mouseenter', function () { show(k); });
    r.addEventListener('focus', function () { show(k); });
  });
  if (data.outputs.length) { show(0); }
})();
"""


def generation_view(
    input_tokens: Sequence[str],
    output_tokens: Sequence[str],
    token_attr: Any,
    *,
    method: Optional[str] = None,
    signed: Optional[bool] = None,
) -> Dict[str, Any]:
    """The data of the token x token view: each row's colours, text colours and shown scores.

    :func:`generation_html` renders it as a standalone page and the explorer's
    generation view (:mod:`captum_prxai.explorer.generation`) inside its own
    page; both through :func:`generation_view_html`.

    Args:
        input_tokens: The columns' names (the prompt's features).
        output_tokens: The rows' names (the generated tokens).
        token_attr: ``(n_out, n_in)`` scores, row ``k`` explaining output token ``k``.
        method: The method's registry name (chooses the colour scale when
            ``signed`` is not given).
        signed: Diverging (``True``) or sequential (``False``) colour scale;
            default: the registered ``method``'s, else whether any score is negative.

    Returns:
        dict: ``inputs`` and ``outputs`` (the tokens as shown), ``scores``
        (the rows, floats), ``colors`` and ``text`` (each cell's background
        and text colour, CSS), ``shown`` (each score as the hover shows it),
        ``signed`` and ``below_zero`` (whether any score is negative).

    Raises:
        ValueError: ``token_attr`` is not ``(len(output_tokens), len(input_tokens))``.
    """
    rows = [_colors.to_float_list(row, "token_attr row") for row in _rows(token_attr)]
    if len(rows) != len(output_tokens) or any(len(r) != len(input_tokens) for r in rows):
        raise ValueError(f"token_attr must be ({len(output_tokens)}, {len(input_tokens)}) for these tokens.")
    flat = [v for row in rows for v in row]
    signed = _colors.resolve_signed(signed, method, flat)
    colors, text, shown = [], [], []
    for row in rows:
        top = _colors.scale_max(row, signed)  # each row on its own scale: rows differ in how much reaches the prompt
        rgb = [_colors.intensity_rgb(t, signed) for t in _colors.intensities(row, signed, top)]
        colors.append([_colors.css_rgb(c) for c in rgb])
        text.append([_colors.css_rgb(_colors.text_on(c)) for c in rgb])
        shown.append([f"{v:.4g}" for v in row])
    return {"inputs": [display_token(t) for t in input_tokens], "outputs": [display_token(t) for t in output_tokens],
            "scores": rows, "colors": colors, "text": text, "shown": shown, "signed": bool(signed),
            "below_zero": any(v < 0 for v in flat)}


def generation_view_html(view: Dict[str, Any]) -> str:
    """The markup of the token x token view of :func:`generation_view`'s ``view``, without page or script.

    The row label, the prompt (recoloured by the hovered row), the table (one
    focusable ``tr.row`` per generated token), the legend, and the view's data
    as a ``<script type="application/json" id="prxai-data">`` that
    :data:`VIEW_SCRIPT` reads. Every token is escaped.

    Args:
        view: What :func:`generation_view` returns.

    Returns:
        str: An HTML fragment.
    """
    signed = view["signed"]
    cells = []
    for k, (row_colors, row_text, row) in enumerate(zip(view["colors"], view["text"], view["scores"])):
        tds = "".join(f'<td style="background:{c};color:{t}" title="{escape(tok)}: {v:.4g}">'
                      f"{v:+.2f}</td>" if signed else
                      f'<td style="background:{c};color:{t}" title="{escape(tok)}: {v:.4g}">'
                      f"{v:.2f}</td>" for c, t, v, tok in zip(row_colors, row_text, row, view["inputs"]))
        cells.append(f'<tr class="row" tabindex="0" data-row="{k}"><th>{escape(view["outputs"][k])}'
                     f"</th>{tds}</tr>")
    header = "".join(f'<th class="col">{escape(t)}</th>' for t in view["inputs"])
    prompt = "".join(f"<span>{escape(t)}</span>" for t in view["inputs"])
    data = json.dumps({"colors": view["colors"], "text": view["text"], "scores": view["shown"],
                       "outputs": view["outputs"]})
    data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    note = _colors.legend_note(signed, below_zero=view["below_zero"])
    return (
        f"<p id=\"row-label\" class=\"meta\"></p><div class=\"prompt\">{prompt}</div>"
        f"<table><thead><tr><th></th>{header}</tr></thead><tbody>{''.join(cells)}</tbody></table>"
        f"<p class=\"legend\">Row k explains generated token k (log p(t_k | prompt, t_&lt;k)); each row has its own "
        f"colour scale. Scale: {escape(_colors.scale_kind(signed))}, {escape(note)}. Hover or focus a row to "
        "colour the prompt by its scores.</p>"
        f"<script type=\"application/json\" id=\"prxai-data\">{data}</script>"
    )


def generation_html(
    input_tokens: Sequence[str],
    output_tokens: Sequence[str],
    token_attr: Any,
    *,
    method: Optional[str] = None,
    model_name: Optional[str] = None,
    signed: Optional[bool] = None,
    title: str = "Explaining generation",
) -> str:
    """The standalone HTML page of a generation explanation.

    Args:
        input_tokens: The columns' names (the prompt's features).
        output_tokens: The rows' names (the generated tokens).
        token_attr: ``(n_out, n_in)`` scores, row ``k`` explaining output token ``k``.
        method: The method's registry name (chooses the colour scale when
            ``signed`` is not given) or description, shown in the header.
        model_name: Shown in the header.
        signed: Diverging (``True``) or sequential (``False``) colour scale;
            default: the registered ``method``'s, else whether any score is negative.
        title: The page's title.

    Returns:
        str: The page, one HTML document with its CSS and script inline.
    """
    view = generation_view(input_tokens, output_tokens, token_attr, method=method, signed=signed)
    meta = " · ".join(escape(x) for x in (f"model: {model_name}" if model_name else "",
                                          f"method: {method}" if method else "") if x)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{escape(title)}</title><style>{VIEW_STYLE}</style></head><body>"
        f"<h1>{escape(title)}</h1><p class=\"meta\">{meta}</p>"
        f"{generation_view_html(view)}<script>{VIEW_SCRIPT}</script>"
        "</body></html>\n"
    )


def _rows(token_attr: Any) -> list:
    if hasattr(token_attr, "tolist"):
        token_attr = token_attr.tolist()
    return list(token_attr)

