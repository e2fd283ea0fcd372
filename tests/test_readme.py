"""The README's promises: its layer example runs, its Quickstart matches `.ci/run`."""

import re

import pytest
from conftest import REPO

README = (REPO / "README.md").read_text()


def _section(title):
    return README.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


# A fresh Python with TensorFlow takes ten seconds: the whole suite runs it, the fast tier does not.
@pytest.mark.slow
def test_layer_example_runs(fresh_python):
    (code,) = re.findall(r"```python\n(.*?)```", _section("Using the layers in your own Keras model"), re.S)
    result = fresh_python(code)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-3:] == ["(2, 4, 32) (2, 4, 32)", "(2, 4, 64)", "(2, 4, 1000)"]


def test_quickstart_has_two_commands_and_ci_runs_the_test_one():
    commands = [
        line
        for block in re.findall(r"```bash\n(.*?)```", _section("Quickstart"), re.S)
        for line in block.splitlines()
        if line and not line.startswith("#")
    ]
    assert len(commands) == 2
    assert "seqtasks run recipes/" in commands[0]
    # CI runs the same steps in the same order (it starts the JAX run between two of them).
    ci = (REPO / ".ci" / "run").read_text()
    positions = [ci.find(step) for step in commands[1].split(" && ")]
    assert -1 not in positions and positions == sorted(positions), (commands[1], positions)


def test_the_default_recipe_is_the_20_minute_one_for_3_minutes_on_every_shipped_anki_pair():
    import dataclasses

    from seqtasks.data.parallel_corpus import read_parallel_tsv
    from seqtasks.recipe import load_recipe

    quick = load_recipe(REPO / "recipes" / "translation.yaml")
    full = load_recipe(REPO / "recipes" / "translation-anki-spa-eng.yaml")
    assert (quick.data.tokenizer, quick.data.lower_case, quick.training.max_minutes) == ("sentencepiece", False, 3)
    assert (quick.data, quick.model, quick.seed) == (full.data, full.model, full.seed)
    assert dataclasses.replace(quick.training, epochs=full.training.epochs, max_minutes=20) == full.training
    pairs = read_parallel_tsv(quick.data.path, quick.data.source_column, quick.data.target_column)
    assert len(pairs) == 116_658 and pairs[0] == ("Ve.", "Go.")
    assert "116,658" in _section("Quickstart")
    attribution = (REPO / "recipes" / "data" / "README.md").read_text().split("## `spa-eng.txt.gz`")[1].split("\n## ")[0]
    assert "116,658" in attribution and "CC-BY 2.0 FR" in attribution
    assert "www.manythings.org/anki and tatoeba.org" in attribution


def test_the_documents_messages_point_to_exist():
    named = set()
    for source in (REPO / "seqtasks").rglob("*.py"):
        text = source.read_text(encoding="utf-8")
        named |= {("file", path) for path in re.findall(r"\b(docs/[\w./-]+\.md)", text)}
        named |= {("section", title) for title in re.findall(r"README: ([A-Z][\w ]*\w)", text)}
    assert ("section", "Backends") in named
    headings = re.findall(r"^#+ (.+)$", (REPO / "README.md").read_text(encoding="utf-8"), re.M)
    for kind, name in sorted(named):
        if kind == "file":
            assert (REPO / name).is_file(), name
        else:
            assert any(heading.startswith(name) for heading in headings), name
