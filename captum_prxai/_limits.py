"""Old name of :mod:`captum_prxai._tokenize`, kept for the modules that still import it."""
from captum_prxai._tokenize import EncodedText, encode_text, max_input_length, model_input_limit  # noqa: F401
