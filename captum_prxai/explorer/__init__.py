"""PR-XAI Explorer: a local web page to browse a dataset and compare attributions side by side.

The Captum Insights workflow for PR-XAI: pick examples of a dataset (search,
filter by true class, predicted class, correct / wrong) or type a text,
choose PR-XAI variants, attention baselines and Captum methods with their
main parameters, and see the heatmaps side by side with the prediction and
timings; draw the attention graph; export the comparison as one HTML file.

From the shell::

    captum-prxai explore --model default --dataset movie-sentences --port 8765

From Python::

    from captum_prxai.explorer import create_app, ServerThread
    server = ServerThread(create_app(model, tokenizer), port=8765).start()

The generation view of a causal LM (a prompt, its continuation, the token x
token matrix of :class:`captum_prxai.llm.LLMGraphAttribution`)::

    captum-prxai explore --decoder smollm2

    from captum_prxai.explorer import create_generation_app
    server = ServerThread(create_generation_app(lm, lm_tokenizer, model_name="smollm2"), port=8765).start()

In a notebook (an iframe to a local server, as Captum Insights)::

    from captum_prxai.explorer import show
    explorer = show(model, tokenizer, {"mine": dataframe})   # columns 'text', 'label'

See ``docs/explorer.md``.

Needs Flask (``pip install flask``).
"""

from captum_prxai.explorer.app import LOOPBACK_HOSTS, create_app
from captum_prxai.explorer.engine import DatasetStore, Engine, as_dataset, model_max_tokens
from captum_prxai.explorer.generation import GenerationEngine, create_generation_app
from captum_prxai.explorer.notebook import show
from captum_prxai.explorer.server import ServerThread, make_server

__all__ = ["DatasetStore", "Engine", "GenerationEngine", "LOOPBACK_HOSTS", "ServerThread", "as_dataset", "create_app",
           "create_generation_app", "make_server", "model_max_tokens", "show"]
