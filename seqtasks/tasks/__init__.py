"""Task implementations: one `Task` subclass per row of a task table (`seqtasks.tasks.table`, and those of other
packages: `seqtasks.recipe.tasks`)."""

import dataclasses
import importlib

from seqtasks.recipe.tasks import task_table
from seqtasks.tasks.base import Evaluation, Task

__all__ = ["Evaluation", "Task", "make_task", "task_class"]


def task_class(name):
    """The `Task` subclass the task table names for task `name`, checked against the contract."""
    spec = task_table()[name]
    module_name, _, class_name = spec.implementation.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise TypeError(f"task {name!r}: {spec.implementation} is not a seqtasks.tasks.Task subclass")
    if cls.__abstractmethods__:
        raise TypeError(f"task {name!r}: {spec.implementation} lacks {', '.join(sorted(cls.__abstractmethods__))}")
    has_decoding = "decoding" in {field.name for field in dataclasses.fields(spec.model_config)}
    if spec.decodes != has_decoding:
        raise TypeError(f"task {name!r}: the task table says decodes={spec.decodes}, but its model section "
                        f"{spec.model_config.__name__} {'has' if has_decoding else 'has no'} `decoding` settings")
    return cls


def make_task(recipe):
    """The task of a merged recipe."""
    return task_class(recipe.task)(recipe)
