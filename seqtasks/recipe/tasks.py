"""The tasks a recipe may name: the task tables installed packages declare, read without importing task code.

The recipe's floor knows no task. Each task declares its recipe sections in its own folder
(`seqtasks/tasks/<name>/config.py`) and its row in a task table (`seqtasks.tasks.table.TASKS`), on the
tasks' floor above this one; a table reaches the recipe loader, the recipe reference and the model card
as an entry point of the group `seqtasks.task_tables` in its package's metadata (pyproject.toml), the
way pytest finds its plugins. So a package of its own can add tasks, and reading a recipe imports the
tables and the tasks' sections only, never a task's code or TensorFlow.
"""

import functools
import importlib.metadata
from collections import ChainMap
from dataclasses import dataclass

from seqtasks.errors import SeqtasksError

ENTRY_POINT_GROUP = "seqtasks.task_tables"


@dataclass(frozen=True)
class TaskSpec:
    """One row of the task table.

    Attributes:
        name: the recipe's `task` value.
        description: one line for the recipe reference.
        data_config, model_config: the dataclasses of the recipe's `data` and
            `model` sections.
        implementation: `module:Class` of the `seqtasks.tasks.Task` subclass.
        monitors: validation metrics `training.monitor` may name.
        headline: the validation metric (of the task's evaluation; higher is
            better) that says how good a model is: `training.average_last`
            keeps the average of the last checkpoints only if it scores
            higher by it than the best epoch's weights. None: the task's recipes
            cannot average so.
        reads_data_files: whether `seqtasks eval --data FILE` applies (the toy
            task makes its own data).
        serving_input: the name of the export's one string input, `text` or
            `image` (encoded image bytes).
        binary_input: whether that input is bytes (an encoded image) rather
            than text: a server takes it only base64-encoded, never as a path.
        serving_outputs: the export's output names; `seqtasks predict` prints
            the first one per input.
        mergeable_signatures: the signatures whose concurrent requests
            `seqtasks serve` may merge into one model call: those whose
            outputs have one row per example and no axis sized by the batch's
            longest input (NER pads its tokens to it, so it has none).
        client_method: the `seqtasks.load` model's method that answers for
            the task (`translate`, `classify`, `tag`, `caption`); None where
            `predict` is the way.
        decodes: whether the task's models write their outputs token by
            token through `seqtasks.decoding.search`: its model section then
            has a `decoding` section (the settings), its export the n-best
            outputs and the per-request settings, its first output a `score`.
    """

    name: str
    description: str
    data_config: type
    model_config: type
    implementation: str
    monitors: tuple = ("val_loss",)
    headline: str = None
    reads_data_files: bool = True
    serving_input: str = "text"
    binary_input: bool = False
    serving_outputs: tuple = ()
    mergeable_signatures: tuple = ()
    client_method: str = None
    decodes: bool = False

    def n_best_outputs(self):
        """The outputs an export with `model.decoding.n_best` > 1 adds: its first output's plural, and `scores`."""
        return (self.serving_outputs[0] + "s", "scores") if self.decodes else ()


@functools.cache
def task_table():
    """Every installed task table, one mapping from a task's name to its `TaskSpec`.

    Read once, through the entry points of `ENTRY_POINT_GROUP`: seqtasks' own table
    first, then the others by entry-point name. The mapping reads the tables
    themselves, so a row put into one later is seen.

    Raises:
        SeqtasksError: no table is installed (seqtasks was not installed with
            pip), or two tables name the same task.
        TypeError: a table is not a mapping of task names to `TaskSpec` rows.
    """
    entries = sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP),
                     key=lambda entry: (entry.name != "seqtasks", entry.name))
    if not entries:
        raise SeqtasksError(
            f"no task table is installed (entry points {ENTRY_POINT_GROUP!r}): install seqtasks with "
            "`pip install -e .` in its checkout, not through PYTHONPATH alone"
        )
    owners, tables = {}, []
    for entry in entries:
        table = entry.load()
        for name, spec in table.items():
            if not isinstance(spec, TaskSpec) or spec.name != name:
                raise TypeError(f"task table {entry.value}: {name!r} is not a TaskSpec named {name!r}")
            if name in owners:
                raise SeqtasksError(f"task {name!r} is in two task tables: {owners[name]} and {entry.value}")
            owners[name] = entry.value
        tables.append(table)
    # A ChainMap iterates its last map first: reversed, the tables keep their order.
    return tables[0] if len(tables) == 1 else ChainMap(*reversed(tables))
