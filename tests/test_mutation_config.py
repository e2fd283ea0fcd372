"""The mutation-testing set-up of docs/testing.md stays consistent with the code it measures."""

import fnmatch
import functools
import inspect
import json
import tomllib
from pathlib import Path

import pytest

from benchmarks import mutation_score

REPO = Path(__file__).resolve().parent.parent
CONFIG = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mutmut"]


def test_every_mutated_file_belongs_to_a_scored_module_and_every_core_file_is_mutated():
    mutated = [
        path.relative_to(REPO).as_posix()
        for path in (REPO / "seqtasks").rglob("*.py")
        if any(fnmatch.fnmatch(path.relative_to(REPO).as_posix(), p) for p in CONFIG["only_mutate"])
    ]
    prefixes = [prefix for _, module_prefixes in mutation_score.MODULES for prefix in module_prefixes]
    for path in mutated:
        assert path.removeprefix("seqtasks/").startswith(tuple(prefixes)), path
    for prefix in prefixes:
        assert any(path.removeprefix("seqtasks/").startswith(prefix) for path in mutated), prefix
    docs = (REPO / "docs" / "testing.md").read_text(encoding="utf-8")
    for name, _ in mutation_score.MODULES:
        assert f"| {name} |" in docs


def test_the_selected_tests_exist_and_the_slow_tier_is_left_out():
    selection = CONFIG["pytest_add_cli_args_test_selection"]
    files = [arg for arg in selection if arg.endswith(".py")]
    assert files and all((REPO / f).is_file() for f in files)
    assert selection[selection.index("-m") + 1] == "not slow or core"
    for path in files:
        assert "pytestmark = pytest.mark.slow" not in (REPO / path).read_text(encoding="utf-8"), path


def test_every_fast_test_file_of_the_layers_and_searches_is_selected():
    # The layers' and searches' tests are what kills their mutants: a file left out makes its mutants survive.
    selected = set(CONFIG["pytest_add_cli_args_test_selection"])
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        text = path.read_text(encoding="utf-8")
        core = "from seqtasks.layers" in text or "from seqtasks.decoding" in text
        fast = "pytestmark = pytest.mark.slow" not in text and text.count("def test_") > text.count("mark.slow")
        if core and fast:
            assert path.relative_to(REPO).as_posix() in selected, path.name


def test_the_equivalent_list_gives_a_reason_for_each_mutant(tmp_path):
    listed = mutation_score.read_equivalent()
    assert all(reason.strip() for reason in listed.values())
    bad = tmp_path / "equivalent.txt"
    bad.write_text("# comment\n\nseqtasks.io_utils.x_f__mutmut_1\n")
    with pytest.raises(SystemExit, match=r"equivalent.txt:3: expected 'mutant_name  # reason'"):
        mutation_score.read_equivalent(bad)


def test_scores_leave_out_equivalent_mutants_and_count_timeouts_as_killed():
    results = {"io_utils": {"a": 1, "b": 36, "c": 0, "d": 0, "e": None}}
    (row,) = [r for r in mutation_score.score_rows(results, {"d": "why"}) if r["module"] == "io_utils"]
    assert (row["mutants"], row["killed"], row["equivalent"], row["survived"], row["unchecked"]) == (5, 2, 1, 1, 1)
    assert row["score"] == 50.0 and row["survivors"] == ["c", "e"]


def test_a_listed_mutant_that_is_gone_or_killed_is_stale():
    results = {"io_utils": {"a": 1, "b": 0, "c": None}, "text": {"d": -24}}
    listed = {name: "why" for name in ("a", "b", "c", "d", "e")}
    assert mutation_score.stale_entries(results, listed) == ["a", "d", "e"]


def test_the_trampoline_shim_lets_getfullargspec_see_the_wrapped_signature():
    from tests.support import mutation_support  # noqa: F401 - installs the shim

    def __init__(self, units, dropout=0.0, **kwargs):
        pass

    @functools.wraps(__init__)
    def _trampoline_wrapper(*args, **kwargs):
        return __init__(*args, **kwargs)

    assert inspect.getfullargspec(_trampoline_wrapper).args == ["self", "units", "dropout"]

    @functools.wraps(__init__)
    def other_wrapper(*args, **kwargs):
        return __init__(*args, **kwargs)

    assert inspect.getfullargspec(other_wrapper).args == []  # only mutmut's trampolines are seen through


def test_a_mutants_tests_run_fastest_first_by_the_durations_mutmut_measured(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from tests.support.mutation_support import fastest_first

    items = [SimpleNamespace(nodeid=name) for name in ("t::slow", "t::unmeasured", "t::quick", "t::middle")]
    monkeypatch.chdir(tmp_path)
    fastest_first(items)  # no stats yet (mutmut's first pass): the order is kept
    assert [item.nodeid for item in items] == ["t::slow", "t::unmeasured", "t::quick", "t::middle"]
    durations = {"t::slow": 2.5, "t::quick": 0.01, "t::middle": 0.3}
    (tmp_path / "mutmut-stats.json").write_text(json.dumps({"duration_by_test": durations}), encoding="utf-8")
    fastest_first(items)
    assert [item.nodeid for item in items] == ["t::quick", "t::middle", "t::slow", "t::unmeasured"]


def test_mutmut_runs_pytest_in_its_own_processes_not_in_xdist_workers():
    # addopts starts two xdist workers; mutmut must see every test run in the process it traces.
    assert "-n 2" in tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]["addopts"]
    assert CONFIG["pytest_add_cli_args"][-2:] == ["-n", "0"]
