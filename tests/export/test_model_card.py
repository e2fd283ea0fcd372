"""The files an export carries in `assets.extra/`: every line from the recipe, the run, the signature or the metrics.

A trained toy run's export is checked in tests/tasks/toy/test_task.py; these build
the files from the shipped recipes, without TensorFlow.
"""

import json

from seqtasks import __version__
from seqtasks.export.model_card import Source, audit_files, data_files
from seqtasks.export.serving_limits import MAX_IMAGE_PIXELS
from seqtasks.recipe import dump_recipe, load_recipe
from seqtasks.tasks import make_task
from tests.conftest import REPO


def _files(recipe, signature, metrics=None, differs=False):
    return audit_files(recipe, signature, SOURCE, make_task(recipe).input_limits(), metrics, differs)

TEXT = {
    "inputs": {"text": {"dtype": "string", "shape": [None]}},
    "outputs": {"score": {"dtype": "float32", "shape": [None]}, "translation": {"dtype": "string", "shape": [None]}},
    "custom_ops": ["FastWordpieceTokenizeWithOffsets", "NormalizeUTF8"],
}
SOURCE = Source("/runs/translation/20260101-000000", "best", "/runs/translation/20260101-000000/best.weights.h5", "ab" * 32)


def test_the_files_hold_the_recipe_its_sources_and_the_metrics(tmp_path):
    recipe = load_recipe(REPO / "recipes" / "translation.yaml", [f"export.directory={tmp_path}"])
    metrics = {"validation": {"bleu": 14.1234, "chrf": 35.5}, "train_pairs": 3600}
    files = _files(recipe, TEXT, metrics)
    assert sorted(files) == ["MODEL_CARD.md", "metrics.json", "recipe.yaml", "source.json", "weights.sha256"]
    assert files["recipe.yaml"] == dump_recipe(recipe)
    assert files["weights.sha256"] == "ab" * 32 + "\n"
    assert json.loads(files["metrics.json"]) == metrics
    assert json.loads(files["source.json"]) == {
        "seqtasks_version": __version__,
        "run_dir": SOURCE.run_dir,
        "checkpoint": "best",
        "checkpoint_file": SOURCE.checkpoint_file,
        "weights_sha256": "ab" * 32,
        "data_files": {"data.path": str(REPO / "recipes" / "data" / "spa-eng.txt.gz")},
        "data_url": "http://www.manythings.org/anki/spa-eng.zip",
        "signature": TEXT,
    }
    assert "metrics.json" not in _files(recipe, TEXT)


def test_the_card_of_a_translation_export(tmp_path):
    recipe = load_recipe(REPO / "recipes" / "translation.yaml")
    metrics = {"validation": {"bleu": 14.1234, "chrf": 35.5}}
    card = _files(recipe, TEXT, metrics)["MODEL_CARD.md"]("saved_models/translation/3")
    lines = card.splitlines()
    assert lines[:5] == ["# translation", "", "Translate sentences with a subword attention encoder-decoder; BLEU and chrF.",
                         "", recipe.description]
    assert (
        f"Exported by seqtasks {__version__} from the run folder `{SOURCE.run_dir}`, its checkpoint best "
        f"(`{SOURCE.checkpoint_file}`)."
    ) in card
    code = card.split("```python\n")[1].split("```")[0]
    assert code.splitlines() == [
        "import tensorflow as tf",
        "import tensorflow_text  # registers the tokenizer's operations the graph uses",
        'serve = tf.saved_model.load("saved_models/translation/3").signatures["serving_default"]',
        'outputs = serve(text=tf.constant(["Your text here."]))',
        'print(outputs["score"].numpy())',
        'print(outputs["translation"].numpy())',
    ]
    assert "| bleu | 14.1234 |\n| chrf | 35.5000 |" in card
    assert f"- `data.path`: `{REPO / 'recipes' / 'data' / 'spa-eng.txt.gz'}`" in card
    assert "\n- Source: http://www.manythings.org/anki/spa-eng.zip\n" in card
    assert "\n- Licence: not recorded in the recipe; check the data's source before sharing this model" in card
    limits = card.split("## Input limits\n\n")[1].splitlines()
    assert limits == [
        "- Any batch size; an empty batch gives empty outputs.",
        "- Only the first 10,000 characters of a text are read.",
        "- A text is read sentence by sentence, at most 64 (later ones are read with the last, as one). A sentence "
        "of at most 120 tokens (`data.max_length` x `data.augment.join_max`, the longest source trained on, pairs "
        "joined by `data.augment.join`) is read whole; a longer one is read in parts of at most as many, cut after "
        "its clause punctuation (, ; :), else between words, each part translated on its own and the parts joined "
        "with the whitespace between them.",
        "- An output has at most 256 tokens (`model.decoding.max_length`), and at most 2 x (its source's tokens + 1) "
        "where the model reads tokens (`model.decoding.length_factor`).",
    ]


def test_a_card_without_scores_says_how_to_measure_them_and_one_measured_with_another_recipe_says_so():
    recipe = load_recipe(REPO / "recipes" / "translation.yaml")
    card = _files(recipe, TEXT)["MODEL_CARD.md"]("v")
    assert (
        "None: seqtasks did not evaluate the best weights. "
        f"`seqtasks eval {SOURCE.run_dir} --checkpoint ... --data FILE` measures them."
    ) in card
    card = _files(recipe, TEXT, {"validation": {"bleu": 1.0}}, True)["MODEL_CARD.md"]("v")
    assert "Measured with the run's own recipe; this export's `recipe.yaml` differs from it." in card


def test_the_card_of_an_image_export_names_the_image_limits():
    recipe = load_recipe(REPO / "recipes" / "captioning.yaml")
    signature = {
        "inputs": {"image": {"dtype": "string", "shape": [None]}},
        "outputs": {"caption": {"dtype": "string", "shape": [None]}, "score": {"dtype": "float32", "shape": [None]}},
        "custom_ops": [],
    }
    card = _files(recipe, signature)["MODEL_CARD.md"]("v")
    assert 'outputs = serve(image=tf.constant([open("image.jpg", "rb").read()]))' in card
    assert "import tensorflow_text" not in card
    assert card.split("## Input limits\n\n")[1].splitlines() == [
        "- Any batch size; an empty batch gives empty outputs.",
        f"- An image is a JPEG, PNG or BMP file of at most {MAX_IMAGE_PIXELS:,} pixels (width times height, read "
        "from its header before decoding); it is resized to 64x64 pixels (`model.backbone.image_size`).",
        "- An output has at most 16 tokens (`model.decoding.max_length`).",
    ]
    assert sorted(data_files(recipe)) == ["data.captions", "data.images", "data.train_split", "data.validation_split"]


def test_the_card_of_a_sentiment_export_says_which_end_of_a_long_text_is_kept(tmp_path):
    recipe = load_recipe(REPO / "recipes" / "sentiment.yaml", ["data.keep=last", "data.max_length=400"])
    signature = {
        "inputs": {"text": {"dtype": "string", "shape": [None]}},
        "outputs": {"label": {"dtype": "string", "shape": [None]}, "probabilities": {"dtype": "float32", "shape": [None, 2]}},
        "custom_ops": ["NormalizeUTF8"],
    }
    card = _files(recipe, signature)["MODEL_CARD.md"]("v")
    assert "| output | `probabilities` | float32 | [batch, 2] |" in card
    assert "- Only the last 20,000 characters of a text are read." in card  # 50 a subword
    assert "- A longer text keeps its last 400 subwords (`data.max_length`, `data.keep`)." in card
    assert "\n- Source: not recorded in the recipe (`data.url`).\n" in card
