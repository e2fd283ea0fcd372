"""The decoding controls from the command line and the Python API: `predict` flags, `with_settings` inputs."""

import pytest
from conftest import seqtasks_command
from serving_support import tiny_translation_export

import seqtasks
from seqtasks.errors import SeqtasksError
from seqtasks.decoding.settings import FIRST_SETTINGS, NAMES as SETTINGS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def export(run_cache):
    return tiny_translation_export(run_cache)[0]


@pytest.fixture(scope="module")
def model(export):
    return seqtasks.load(export)


def test_predict_flags_sample_as_the_api_does(export, model):
    result = seqtasks_command(
        "predict", export, "Tengo hambre.", "--num-samples", 3, "--n-best", 3, "--seed", 5, "--temperature", 1.5
    )
    expected = model.translate("Tengo hambre.", num_samples=3, n_best=3, seed=5, temperature=1.5).n_best
    assert result.stdout.splitlines() == [f"{score:.4f}\t{text}" for text, score in expected]
    blocked = seqtasks_command("predict", export, "Tengo hambre.", "--no-repeat-ngram-size", 1)
    words = blocked.stdout.strip().split()
    assert len(words) == len(set(words))  # no word twice


def test_predict_flags_out_of_bounds_are_one_line_errors(export):
    result = seqtasks_command("predict", export, "Hola.", "--beam-width", 99, expect=2)
    assert result.output.strip().splitlines()[-1].startswith("Error: ")
    assert "beam_width: expected 1..16; got 99" in result.output and "Traceback" not in result.output
    result = seqtasks_command("predict", export, "Hola.", "--top-p", 0, expect=2)
    assert "top_p: expected 0.01..1.0; got 0" in result.output


def test_the_api_sends_what_the_export_takes_and_names_what_an_older_export_lacks(model, monkeypatch):
    assert model.settings_accepted() == SETTINGS
    assert set(model.decoding_defaults()) == set(SETTINGS)
    signatures = model.signatures()
    older = {**signatures["with_settings"], "inputs": {
        key: value for key, value in signatures["with_settings"]["inputs"].items() if key not in SETTINGS[4:]}}
    monkeypatch.setattr(model, "signatures", lambda: {**signatures, "with_settings": older})
    assert model.settings_accepted() == FIRST_SETTINGS
    with pytest.raises(SeqtasksError) as error:
        model.translate("Hola.", top_k=5)
    assert str(error.value) == (
        f"top_k: this export takes only the settings {list(FIRST_SETTINGS)} (it was made before the others "
        "existed; export it again to add them)"
    )


def test_a_prefix_starts_every_translation_and_its_own_start_gives_it_back(model, export):
    source = "Tengo hambre."
    plain = model.translate(source, n_best=2, beam_width=3)
    first_word = plain.text.split()[0]
    again = model.translate(source, prefix=first_word, n_best=2, beam_width=3)
    assert again.text == plain.text  # the best translation starts so already
    # The tiny model writes lower case (data.lower_case).
    forced = model.translate([source, "Hola."], prefix=["nobody", "nobody knows"])
    assert forced[0].text.startswith("nobody") and forced[1].text.startswith("nobody knows")
    with pytest.raises(SeqtasksError, match=r"^prefix: expected a string, or one per input \(2\)$"):
        model.translate([source, "Hola."], prefix=["a"])
    result = seqtasks_command("predict", export, "--json", source, "--beam-width", 3)
    assert plain.text in result.stdout
    result = seqtasks_command("predict", export, source, "Hola.", "--prefix", "nobody")
    assert result.stdout.splitlines() == [t.text for t in model.translate([source, "Hola."], prefix="nobody")]


def test_the_export_keeps_its_own_settings_and_needs_no_recipe_file(model, tmp_path):
    import shutil

    from seqtasks.export.saved_model import AUDIT_FOLDER

    recipe = model.recipe().model.decoding
    assert model.decoding_defaults() == {name: getattr(recipe, name) for name in SETTINGS}
    copy = shutil.copytree(model.path, tmp_path / "export")  # the version folder
    (copy / AUDIT_FOLDER / "recipe.yaml").unlink()
    alone = seqtasks.load(copy)
    assert alone.recipe() is None
    assert alone.decoding_defaults() == model.decoding_defaults()
    # A call that sends one setting gets the rest from the export: the same as sending them all.
    assert alone.translate("Tengo hambre.", n_best=1).text == model.translate(
        "Tengo hambre.", **{**model.decoding_defaults(), "n_best": 1}).text
