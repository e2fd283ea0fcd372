"""The documentation's promises: the README and the pages under docs/.

The layer example runs, the Quickstart matches `.ci/run`, the task sections name what each export
takes and returns and recipe keys that exist, every relative link leads to a file (and heading),
and the README's lines fit in 100 characters.
"""

import dataclasses
import re
from types import SimpleNamespace

import pytest

from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# The README's sections for the tasks of the task table (the toy task is in "Recipes").
TASK_SECTIONS = {"translation": "Translation", "sentiment": "Sentiment", "ner": "NER", "captioning": "Image captioning"}
_FENCE = re.compile(r"^\s*(```|~~~)")


def _prose_lines(text):
    """`(line, in_code)` for each line of Markdown `text`, `in_code` true inside fenced code blocks."""
    in_code = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_code = not in_code
            yield line, True
        else:
            yield line, in_code


def _section(title, page="README.md"):
    """The `## title` section of `page` (a Markdown file, from the repository root), up to the next
    `#` or `##` heading outside code blocks."""
    lines, found = [], False
    for line, in_code in _prose_lines((REPO / page).read_text(encoding="utf-8")):
        heading = not in_code and re.match(r"#{1,2} ", line)
        if found and heading:
            break
        if found:
            lines.append(line)
        found = found or (not in_code and line == f"## {title}")
    assert found, f"{page} has no section '## {title}'"
    return "\n".join(lines)


def _quickstart_commands():
    return [
        line
        for block in re.findall(r"```bash\n(.*?)```", _section("Quickstart"), re.S)
        for line in block.splitlines()
        if line and not line.startswith("#")
    ]


# A fresh Python with TensorFlow takes ten seconds: the whole suite runs it, the fast tier does not.
@pytest.mark.slow
def test_layer_example_runs(fresh_python):
    section = _section("Using the layers in your own Keras model", "docs/layers.md")
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    result = fresh_python(code)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-3:] == ["(2, 4, 32) (2, 4, 32)", "(2, 4, 64)", "(2, 4, 1000)"]


@pytest.mark.slow
def test_decoding_example_runs(fresh_python):
    (code,) = re.findall(r"```python\n(.*?)```", _section("Decoding: search preferences and sampling", "docs/layers.md"), re.S)
    result = fresh_python(code)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-4:] == [
        "[2 3 2 3 2 3]", "[2 0]", "[[0], [2, 2, 0], [2, 3, 0]]", "True"
    ]


@pytest.mark.slow
def test_word_vectors_example_runs(fresh_python):
    (code,) = re.findall(r"```python\n(.*?)```", _section("Pretrained word vectors in your own model", "docs/layers.md"), re.S)
    result = fresh_python(code)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-2:] == ["(7, 50) 4 5 0.984", "(1, 3, 50)"]


def test_quickstart_has_two_commands_and_ci_runs_the_test_one():
    commands = _quickstart_commands()
    assert len(commands) == 2
    assert "seqtasks run recipes/" in commands[0]
    # CI runs the same steps in the same order (it starts the JAX run between two of them).
    ci = (REPO / ".ci" / "run").read_text()
    positions = [ci.find(step) for step in commands[1].split(" && ")]
    assert -1 not in positions and positions == sorted(positions), (commands[1], positions)


def test_the_default_recipe_is_the_20_minute_one_for_3_minutes_on_every_shipped_anki_pair():
    from seqtasks.data.parallel_corpus import read_parallel_tsv
    from seqtasks.recipe import load_recipe

    quick = load_recipe(REPO / "recipes" / "translation.yaml")
    full = load_recipe(REPO / "recipes" / "translation-anki-spa-eng.yaml")
    assert (quick.data.tokenizer, quick.data.lower_case, quick.training.max_minutes) == ("sentencepiece", False, 3)
    assert (quick.data, quick.model, quick.seed) == (full.data, full.model, full.seed)
    # The 20-minute run keeps 4 checkpoints and ends with their average where it scores higher; 3 minutes keep too
    # few late checkpoints for that.
    assert (full.training.keep_checkpoints, full.training.average_last, quick.training.average_last) == (4, 4, 0)
    assert dataclasses.replace(quick.training, epochs=full.training.epochs, max_minutes=20, keep_checkpoints=4,
                               average_last=4) == full.training
    pairs = read_parallel_tsv(quick.data.path, quick.data.source_column, quick.data.target_column)
    assert len(pairs) == 116_658 and pairs[0] == ("Ve.", "Go.")
    assert "116,658" in _section("Quickstart")
    attribution = _section("`spa-eng.txt.gz`", "recipes/data/README.md")
    assert "116,658" in attribution and "CC-BY 2.0 FR" in attribution
    assert "www.manythings.org/anki and tatoeba.org" in attribution


def test_the_documents_messages_point_to_exist():
    named = set()
    for source in (REPO / "seqtasks").rglob("*.py"):
        text = source.read_text(encoding="utf-8")
        named |= {("file", path) for path in re.findall(r"\b(docs/[\w./-]+\.md)", text)}
        named |= {("section", title) for title in re.findall(r"README: ([A-Z][\w ]*\w)", text)}
    # The JAX multi-worker error sends the user to the backends page.
    assert ("file", "docs/backends.md") in named
    headings = re.findall(r"^#+ (.+)$", README, re.M)
    for kind, name in sorted(named):
        if kind == "file":
            assert (REPO / name).is_file(), name
        else:
            assert any(heading.startswith(name) for heading in headings), name


def test_readme_lines_are_at_most_100_characters():
    # The Quickstart's first command is longer, and stays one line: it is what people copy and what
    # the Quickstart test reads.
    allowed = set(_quickstart_commands())
    long = [(number, line) for number, line in enumerate(README.splitlines(), 1) if len(line) > 100]
    assert [(number, line) for number, line in long if line not in allowed] == []


def _slug(heading):
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path):
    """The `#anchor`s of a Markdown file's headings, numbered as GitHub numbers repeated ones."""
    anchors = set()
    for line, in_code in _prose_lines(path.read_text(encoding="utf-8")):
        match = not in_code and re.match(r"#{1,6} (.+?)\s*#*$", line)
        if match:
            slug = _slug(match.group(1))
            anchor, count = slug, 0
            while anchor in anchors:
                count += 1
                anchor = f"{slug}-{count}"
            anchors.add(anchor)
    return anchors


def _links(path):
    """The targets of a Markdown file's inline links and images, code blocks and code spans left out."""
    prose = "\n".join(line for line, in_code in _prose_lines(path.read_text(encoding="utf-8")) if not in_code)
    prose = re.sub(r"`[^`\n]*`", "", prose)
    return re.findall(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", prose)


@pytest.mark.parametrize("page", PAGES, ids=lambda path: str(path.relative_to(REPO)))
def test_every_relative_link_leads_to_a_file_and_heading(page):
    links = _links(page)
    broken = []
    for target in links:
        if re.match(r"[a-zA-Z][\w+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.name}")
    assert broken == [], broken


def test_the_readme_links_every_docs_page():
    linked = {(REPO / target.partition("#")[0]).resolve() for target in _links(REPO / "README.md")}
    pages = {path.resolve() for path in (REPO / "docs").glob("*.md")}
    assert sorted(path.name for path in pages - linked) == []


def test_the_recipes_section_lists_every_built_in_recipe():
    listed = set(re.findall(r"^\| `([\w-]+)` \|", _section("Recipes"), re.M))
    assert listed == {path.stem for path in (REPO / "recipes").glob("*.yaml")}


def _has_key(config_class, dotted):
    """Whether `dotted` (such as `decoding.n_best`) names a field of the dataclass `config_class`."""
    for part in dotted.split("."):
        fields = {field.name: field for field in dataclasses.fields(config_class)} if config_class else {}
        if part not in fields:
            return False
        config_class = fields[part].type if dataclasses.is_dataclass(fields[part].type) else None
    return True


@pytest.mark.parametrize("task", TASK_SECTIONS)
def test_each_task_section_names_its_export_and_recipe_keys_that_exist(task):
    from seqtasks.tasks.table import TASKS

    spec, section = TASKS[task], _section(TASK_SECTIONS[task])
    named = set(re.findall(r"`([\w.]+)`", section))
    assert {spec.serving_input, *spec.serving_outputs, *spec.n_best_outputs()} <= named
    keys = re.findall(r"`(data|model)\.([\w.]+)", section)
    assert keys
    config = {"data": spec.data_config, "model": spec.model_config}
    assert [f"{part}.{key}" for part, key in keys if not _has_key(config[part], key)] == []
    recipes = re.findall(rf"`({task}(?:-[\w-]+)?)`", section)
    assert [recipe for recipe in recipes if not (REPO / "recipes" / f"{recipe}.yaml").is_file()] == []


def _signatures(module):
    from seqtasks.export.saved_model import module_signatures

    return set(module_signatures(module))


def test_the_exports_hold_the_signatures_the_task_sections_name():
    from seqtasks.tasks.captioning.export import image_reader
    from seqtasks.tasks.sentiment.export import make_classifier_module
    from seqtasks.encoder_decoder.export import make_encoder_decoder_module, text_reader
    from seqtasks.tasks.ner.export import make_tagger_module

    from seqtasks.recipe.schema import DecodingConfig

    decoding = DecodingConfig(beam_width=2, max_length=5)

    def seq2seq(attention):
        return SimpleNamespace(decoder_layer=SimpleNamespace(attention=attention))

    def classifier(pooling):
        return SimpleNamespace(attention_pooling=pooling)

    both = {"serving_default", "with_settings", "with_prefix", "score", "attention"}
    # Translation and the toy task: `with_settings`, `with_prefix` and `score` always, `attention` when the model
    # has attention.
    texts, images = text_reader(None, 10), image_reader(None, 64)
    assert _signatures(make_encoder_decoder_module(seq2seq("luong"), texts, None, "translation", decoding)) == both
    assert _signatures(make_encoder_decoder_module(seq2seq("none"), texts, None, "output", decoding)) == both - {"attention"}
    assert _signatures(make_encoder_decoder_module(seq2seq("bahdanau"), images, None, "caption", decoding)) == both
    # Sentiment: `attention` only with attention pooling; NER: `serving_default` and `from_tokens`.
    assert _signatures(make_classifier_module(classifier(None), None, None, ["a", "b"], 10)) == {"serving_default"}
    assert _signatures(make_classifier_module(classifier(object()), None, None, ["a", "b"], 10)) == {
        "serving_default",
        "attention",
    }
    assert _signatures(make_tagger_module(None, None, ["O"], 10, "treebank")) == {"serving_default", "from_tokens"}
    for task in ("sentiment", "ner"):
        assert "no `with_settings`" in " ".join(_section(TASK_SECTIONS[task]).split())
    assert "no `attention`" in " ".join(_section("NER").split())
