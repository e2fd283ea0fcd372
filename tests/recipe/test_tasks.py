"""The task tables the recipe floor reads: found through entry points, merged, refused when they clash."""

import dataclasses
import importlib.metadata

import pytest

from seqtasks.errors import SeqtasksError
from seqtasks.recipe import tasks as recipe_tasks
from seqtasks.recipe.tasks import ENTRY_POINT_GROUP, TaskSpec, task_table
from seqtasks.tasks.table import TASKS

OTHER = {"summary": TaskSpec("summary", "Summarise.", object, object, "summaries.task:SummaryTask")}
CLASH = {"ner": dataclasses.replace(TASKS["ner"], description="another NER")}
NOT_A_ROW = {"summary": {"name": "summary"}}
MISNAMED = {"summary": dataclasses.replace(OTHER["summary"], name="summaries")}


@pytest.fixture
def installed(monkeypatch):
    """Pretends the entry points of the given `name=value` pairs are the installed task tables."""
    task_table.cache_clear()

    def install(*pairs):
        entries = [importlib.metadata.EntryPoint(name, value, ENTRY_POINT_GROUP) for name, value in pairs]
        seen = []

        def entry_points(group):
            seen.append(group)
            return entries

        monkeypatch.setattr(recipe_tasks.importlib.metadata, "entry_points", entry_points)
        return seen

    yield install
    task_table.cache_clear()


def test_the_installed_package_declares_its_own_table():
    (entry,) = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    assert (entry.name, entry.value) == ("seqtasks", "seqtasks.tasks.table:TASKS")
    assert task_table() is TASKS


def test_the_tables_are_read_once_from_the_group(installed):
    seen = installed(("seqtasks", "seqtasks.tasks.table:TASKS"))
    assert task_table() is TASKS and task_table() is TASKS
    assert seen == [ENTRY_POINT_GROUP]


def test_another_package_s_table_adds_its_tasks_after_seqtasks_own(installed, monkeypatch):
    # "aaa" sorts before "seqtasks" and "zzz" after it: seqtasks' table comes first all the same.
    installed(("zzz", f"{__name__}:OTHER"), ("seqtasks", "seqtasks.tasks.table:TASKS"), ("aaa", f"{__name__}:OTHER2"))
    monkeypatch.setitem(globals(), "OTHER2", {"other": dataclasses.replace(OTHER["summary"], name="other")})
    tasks = task_table()
    assert list(tasks) == [*TASKS, "other", "summary"]
    assert tasks["summary"] is OTHER["summary"] and tasks["ner"] is TASKS["ner"]
    # The tables themselves are read: a row put into one later is seen.
    monkeypatch.setitem(OTHER, "later", dataclasses.replace(OTHER["summary"], name="later"))
    assert tasks["later"].name == "later" and list(tasks)[-1] == "later"


def test_a_task_in_two_tables_is_an_error_naming_both(installed):
    installed(("seqtasks", "seqtasks.tasks.table:TASKS"), ("more", f"{__name__}:CLASH"))
    with pytest.raises(SeqtasksError, match=rf"^task 'ner' is in two task tables: seqtasks.tasks.table:TASKS and "
                                            rf"{__name__}:CLASH$"):
        task_table()


@pytest.mark.parametrize("table", ["NOT_A_ROW", "MISNAMED"])
def test_a_row_that_is_not_a_task_spec_of_its_name_is_an_error(installed, table):
    installed(("more", f"{__name__}:{table}"))
    with pytest.raises(TypeError, match=rf"^task table {__name__}:{table}: 'summary' is not a TaskSpec named 'summary'$"):
        task_table()


def test_no_installed_table_is_an_error_saying_to_install_seqtasks(installed):
    installed()
    with pytest.raises(SeqtasksError, match=r"^no task table is installed \(entry points 'seqtasks.task_tables'\): "
                                            r"install seqtasks with `pip install -e \.` in its checkout"):
        task_table()
