"""Exceptions raised by captum-prxai.

Every error caused by the caller's input is a :class:`PRXAIError` carrying an
exact, human-readable message. The command line prints that message alone
(no traceback) and exits with status 2.
"""


class PRXAIError(ValueError):
    """Bad input or an unsupported setting, with a message that says what to do."""


class ConvergenceError(PRXAIError, RuntimeError):
    """An iterative solver (PageRank) did not reach its tolerance."""


class PRXAIWarning(UserWarning):
    """Something that may make the scores misleading, e.g. a padding mask that was inferred or missing."""
