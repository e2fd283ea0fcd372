"""The task contract: the table names real `Task` classes, and exports must serve what the table declares."""

import dataclasses

import pytest

from seqtasks.tasks.table import TASKS, TaskSpec
from seqtasks.tasks import Task, task_class


@pytest.mark.parametrize("name", list(TASKS))
def test_every_task_in_the_table_loads_a_complete_task_class(name):
    cls = task_class(name)
    assert issubclass(cls, Task) and not cls.__abstractmethods__
    assert f"{cls.__module__}:{cls.__name__}" == TASKS[name].implementation
    spec = TASKS[name]
    assert spec.serving_input in ("text", "image") and spec.serving_outputs
    assert "val_loss" in spec.monitors


def _sections(cls):
    """`cls` and the section dataclasses nested in it, at any depth."""
    yield cls
    for field in dataclasses.fields(cls):
        if dataclasses.is_dataclass(field.default_factory):
            yield from _sections(field.default_factory)


@pytest.mark.parametrize("name", list(TASKS))
def test_a_task_s_own_recipe_sections_lie_in_its_folder_and_document_every_field(name):
    spec = TASKS[name]
    folder = spec.implementation.partition(":")[0].rpartition(".")[0]
    assert folder == f"seqtasks.tasks.{name}"
    for section in {*_sections(spec.data_config), *_sections(spec.model_config)}:
        # A section is the task's own (its folder's config.py) or one every task shares (the schema).
        assert section.__module__ in (f"{folder}.config", "seqtasks.recipe.schema"), section
        for field in dataclasses.fields(section):
            assert field.metadata.get("doc"), f"{section.__name__}.{field.name}"
    assert spec.data_config.__module__ == f"{folder}.config"


def _with_row(monkeypatch, **changes):
    monkeypatch.setitem(TASKS, "toy", dataclasses.replace(TASKS["toy"], **changes))


def test_a_misspelled_implementation_is_an_error_naming_it(monkeypatch):
    _with_row(monkeypatch, implementation="seqtasks.tasks.toy.task:ToyTsak")
    with pytest.raises(TypeError, match=r"task 'toy': seqtasks.tasks.toy.task:ToyTsak is not a seqtasks.tasks.Task subclass"):
        task_class("toy")


class HalfTask(Task):
    def read_splits(self):
        return [], []


def test_a_task_class_missing_methods_is_an_error_listing_them(monkeypatch):
    _with_row(monkeypatch, implementation=f"{__name__}:HalfTask")
    with pytest.raises(TypeError, match=r"HalfTask lacks build_model, compile_model, datasets, evaluate, prepare"):
        task_class("toy")


def test_the_table_says_which_tasks_decode_and_a_row_that_disagrees_with_its_model_section_is_an_error(monkeypatch):
    assert {name for name, spec in TASKS.items() if spec.decodes} == {"toy", "translation", "captioning"}
    _with_row(monkeypatch, decodes=False)
    with pytest.raises(TypeError, match=r"task 'toy': the task table says decodes=False, but its model section "
                                        r"Seq2SeqModelConfig has `decoding` settings"):
        task_class("toy")
    monkeypatch.setitem(TASKS, "ner", dataclasses.replace(TASKS["ner"], decodes=True))
    with pytest.raises(TypeError, match=r"task 'ner': the task table says decodes=True, but its model section "
                                        r"TaggerModelConfig has no `decoding` settings"):
        task_class("ner")


def test_a_task_reading_no_files_refuses_eval_files():
    from seqtasks.cli import resolve_recipe
    from seqtasks.errors import SeqtasksError
    from seqtasks.recipe.loader import load_recipe
    from seqtasks.tasks import make_task

    task = make_task(load_recipe(resolve_recipe("toy")))
    assert task.spec is TASKS["toy"] and not task.spec.reads_data_files
    with pytest.raises(SeqtasksError, match="task 'toy' makes its own data; it has no data files to evaluate on"):
        task.read_file("digits.txt")


def _server(outputs, input_name="text"):
    import tensorflow as tf

    class Server(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=input_name)])
        def serve(self, text):
            return {name: text for name in outputs}

    return Server()


def test_an_export_must_serve_the_declared_input_and_outputs():
    from seqtasks.lifecycle.runner import check_serving_signature

    spec = TaskSpec("x", "", object, object, "m:C", serving_input="text", serving_outputs=("translation", "score"))
    check_serving_signature(_server(["score", "translation"]).serve, spec)
    with pytest.raises(TypeError, match=r"task 'x': the serving function maps \['text'\] to \['output', 'score'\]; "
                                        r"the task table declares \['text'\] to \['score', 'translation'\]"):
        check_serving_signature(_server(["output", "score"]).serve, spec)
    with pytest.raises(TypeError, match=r"maps \['image'\]"):
        check_serving_signature(_server(["score", "translation"], "image").serve, spec)


@pytest.mark.slow
def test_reading_recipes_imports_the_tasks_sections_but_no_task_code_nor_tensorflow(fresh_python):
    # The recipe loader finds the task table through its entry point: the table, the tasks' config.py files,
    # their packages' __init__ files and the contract load; no task.py, export.py, TensorFlow or Keras.
    result = fresh_python(
        "import re, sys\n"
        "from seqtasks.cli import resolve_recipe\n"
        "from seqtasks.recipe import load_recipe\n"
        "from seqtasks.recipe.reference import reference\n"
        "for name in ('toy', 'translation', 'sentiment', 'ner', 'captioning'):\n"
        "    load_recipe(resolve_recipe(name), ['training.epochs=2'])\n"
        "reference()\n"
        "sections = re.compile(r'seqtasks\\.tasks(\\.table|\\.base|\\.\\w+(\\.config)?)?')\n"
        "tasks = sorted(m for m in sys.modules if m.startswith('seqtasks.tasks'))\n"
        "assert 'seqtasks.tasks.table' in tasks and 'seqtasks.tasks.ner.config' in tasks, tasks\n"
        "code = [m for m in tasks if not sections.fullmatch(m)]\n"
        "code += [m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras')]\n"
        "assert not code, code\n"
    )
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.parametrize(
    "task, outputs",
    [
        ("toy", ("outputs", "scores")),
        ("translation", ("translations", "scores")),
        ("captioning", ("captions", "scores")),
        ("sentiment", ()),
        ("ner", ()),
    ],
)
def test_the_outputs_an_n_best_export_adds_by_task(task, outputs):
    from seqtasks.tasks.table import TASKS

    assert TASKS[task].n_best_outputs() == outputs
