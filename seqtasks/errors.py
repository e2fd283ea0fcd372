"""Errors that are the user's to fix: the CLI prints them in one line and exits with status 2."""


class SeqtasksError(Exception):
    """Base class of every error caused by user input (a recipe, a data file, a flag)."""


class RecipeError(SeqtasksError):
    """A recipe file or a `--set` override is invalid."""
