"""Errors that are the user's to fix: the CLI prints them in one line and exits with status 2."""


class SeqtasksError(Exception):
    """Base class of every error caused by user input (a recipe, a data file, a flag)."""


class RecipeError(SeqtasksError):
    """A recipe file or a `--set` override is invalid."""


class ModelFailure(SeqtasksError):
    """A model call that failed for a reason other than its input (memory, a broken file).

    `code` names TensorFlow's error class, e.g. `ResourceExhaustedError`;
    `seqtasks serve` answers it with the HTTP status TensorFlow Serving gives
    that code.
    """

    def __init__(self, message, code="UnknownError"):
        super().__init__(message)
        self.code = code
