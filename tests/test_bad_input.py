"""Bad input, one row each: the CLI exits with status 2 and one line that names the file, line or field."""

import gzip
import json
import re

import pytest
from click.testing import CliRunner

from seqtasks.cli import main
from seqtasks.errors import SeqtasksError

TRANSLATION = """task: translation
data: {path: pairs.tsv, validation_size: 1, source_vocab_size: 50, target_vocab_size: 50}
model: {embedding_dim: 4, encoder: {units: 4}, decoder: {units: 4}}
training: {epochs: 1}
export: {enabled: false}
"""
NER = """task: ner
data: {path: train.conll, validation_size: 1}
training: {epochs: 1}
export: {enabled: false}
"""
SENTIMENT = """task: sentiment
data: {format: tsv, path: texts.tsv, validation_size: 1, vocab_size: 50}
training: {epochs: 1}
export: {enabled: false}
"""
CAPTIONING = """task: captioning
data: {captions: captions.txt, train_split: train.txt, validation_split: dev.txt, images: images}
model: {backbone: {type: cnn, image_size: 16, filters: [4]}}
training: {epochs: 1}
export: {enabled: false}
"""
PAIRS = "Hello.\tHola.\nThanks.\tGracias.\n"
SHAPE_PNG = (  # a valid 1x1 PNG
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde\x00\x00"
    b"\x00\x0cIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\xa7\x35\x81\x84\x00\x00\x00\x00IEND\xaeB`\x82"
)

# id: (recipe, {file: content (None: a folder)}, extra arguments, the expected message as a regular expression)
ROWS = {
    "missing data file": (TRANSLATION, {}, [], r"pairs\.tsv: no such data file"),
    "data path is a folder": (TRANSLATION, {"pairs.tsv": None}, [], r"pairs\.tsv: is a folder, expected a data file"),
    "empty data file": (TRANSLATION, {"pairs.tsv": ""}, [], r"pairs\.tsv: no sentence pairs in the file"),
    "too few columns": (
        TRANSLATION, {"pairs.tsv": PAIRS + "Bye. Adiós.\n"}, [],
        r"pairs\.tsv:3: expected at least 2 tab-separated columns \(source column 1, target column 0\); got 1",
    ),
    "invalid UTF-8": (
        TRANSLATION, {"pairs.tsv": PAIRS.encode() + b"\xff\xfe\tx\n"}, [], r"pairs\.tsv:3: not valid utf-8 \(byte 1",
    ),
    "mixed encodings (a Latin-1 line)": (
        TRANSLATION, {"pairs.tsv": PAIRS.encode() + "Coffee.\tCafé.\n".encode("latin-1")}, [],
        r"pairs\.tsv:3: not valid utf-8 \(byte 12 of the line\)",
    ),
    "invalid UTF-8 in a gzip data file": (
        TRANSLATION,
        {"pairs.tsv.gz": gzip.compress(PAIRS.encode() + "Coffee.\tCafé.\n".encode("latin-1"), mtime=0)},
        ["--set", "data.path={root}/pairs.tsv.gz"],
        r"pairs\.tsv\.gz:3: not valid utf-8 \(byte 12 of the line\)",
    ),
    "unknown encoding": (
        TRANSLATION, {"pairs.tsv": PAIRS}, ["--set", "data.encoding=klingon"], r"unknown text encoding 'klingon'",
    ),
    "CoNLL tag of another scheme": (
        NER, {"train.conll": "John B-PER\nSmith E-PER\n\nHi O\n"}, [],
        r"train\.conll:2: tag 'E-PER' is not O, B-TYPE or I-TYPE \(data\.scheme is iob2; other schemes such as IOBES",
    ),
    "CoNLL line without a tag": (
        NER, {"train.conll": "John B-PER\nSmith\n"}, ["--set", "data.tag_column=1"],
        r"train\.conll:2: expected at least 2 columns",
    ),
    "empty CoNLL file": (NER, {"train.conll": "\n\n"}, [], r"train\.conll: no sentences in the file"),
    "labelled text line without a tab": (
        SENTIMENT, {"texts.tsv": "label\ttext\n1\tgood\n0 bad\n"}, [], r"texts\.tsv:3: expected 'label<TAB>text'; found no tab",
    ),
    "CSV row with too many columns": (
        SENTIMENT.replace("format: tsv, path: texts.tsv", "format: csv, path: texts.csv"),
        {"texts.csv": "text,label\ngood,1\n\"bad, really\",0,extra\n"}, [],
        r"texts\.csv:3: expected 2 columns as in the header; got 3",
    ),
    "image that is not an image": (
        CAPTIONING,
        {
            "captions.txt": "a.png#0\ta red square\nb.png#0\ta blue circle\n",
            "train.txt": "a.png\n",
            "dev.txt": "b.png\n",
            "images": None,
            "images/a.png": b"this is text, not a PNG",
            "images/b.png": SHAPE_PNG,
        },
        [],
        r"images/a\.png: not a readable image \(JPEG, PNG, GIF or BMP\)",
    ),
    "image file missing": (
        CAPTIONING,
        {"captions.txt": "a.png#0\ta red square\nb.png#0\tx\n", "train.txt": "a.png\n", "dev.txt": "b.png\n",
         "images": None, "images/b.png": SHAPE_PNG},
        [],
        r"images: 1 image file\(s\) the captions name are missing, e\.g\. 'a\.png'",
    ),
    "misspelled recipe key": (
        TRANSLATION.replace("epochs: 1", "epohcs: 1"), {"pairs.tsv": PAIRS}, [],
        r"recipe\.yaml: training\.epohcs: unknown key; .*\(did you mean 'epochs'\?\) \(line 4\)",
    ),
    "wrong type": (
        TRANSLATION.replace("epochs: 1", "epochs: three"), {"pairs.tsv": PAIRS}, [],
        r"recipe\.yaml: training\.epochs: expected an integer; got 'three' \(line 4\)",
    ),
    "negative size": (
        TRANSLATION.replace("units: 4}, decoder", "units: -4}, decoder"), {"pairs.tsv": PAIRS}, [],
        r"recipe\.yaml: model\.encoder\.units: expected at least 1; got -4 \(line 3\)",
    ),
    "beam width of 0": (
        TRANSLATION, {"pairs.tsv": PAIRS}, ["--set", "model.decoding.beam_width=0"],
        r"--set model\.decoding\.beam_width: expected at least 1; got 0",
    ),
    "--set on a key that does not exist": (
        TRANSLATION, {"pairs.tsv": PAIRS}, ["--set", "model.decoder.unit=8"],
        r"--set model\.decoder\.unit: unknown key",
    ),
    "--set without a value": (
        TRANSLATION, {"pairs.tsv": PAIRS}, ["--set", "training.epochs"],
        r"--set 'training\.epochs': expected KEY=VALUE with a dotted key, e\.g\. training\.epochs=3",
    ),
    "recipe that is not YAML": ("task: [translation\n", {}, [], r"recipe\.yaml: invalid YAML"),
    "recipe that runs code": (
        "task: !!python/object/apply:os.system [echo hi]\n", {}, [], r"recipe\.yaml: invalid YAML",
    ),
    "recipe name that would leave the output folder": (
        "name: ../../escape\n" + TRANSLATION, {"pairs.tsv": PAIRS}, [],
        r"recipe\.yaml: name: expected letters, digits, '\.', '_' or '-' \(a folder name\); got '\.\./\.\./escape' \(line 1\)",
    ),
    "output folder that is a file": (
        TRANSLATION, {"pairs.tsv": PAIRS, "blocker": ""}, ["--output-dir", "{root}/blocker/runs"],
        r"blocker/runs/recipe: cannot create the run folder",
    ),
}


def _write(root, files):
    for name, content in files.items():
        path = root / name
        if content is None:
            path.mkdir(parents=True, exist_ok=True)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


@pytest.mark.parametrize("row", list(ROWS), ids=list(ROWS))
def test_bad_input_exits_2_with_one_line_naming_it(tmp_path, row):
    recipe, files, extra, expected = ROWS[row]
    (tmp_path / "recipe.yaml").write_text(recipe, encoding="utf-8")
    _write(tmp_path, files)
    args = [arg.format(root=tmp_path) for arg in extra]
    if "--output-dir" not in args:
        args += ["--output-dir", str(tmp_path / "runs")]
    result = CliRunner().invoke(main, ["run", str(tmp_path / "recipe.yaml"), *args])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert re.search(expected, lines[0]), lines[0]


def test_models_load_in_safe_mode_only(tmp_path):
    """A `.keras` file with a Python lambda (code) is refused, as a run's model and as a backbone."""
    import keras

    from seqtasks.data.image_features import load_backbone

    inputs = keras.Input((8, 8, 3))
    model = keras.Model(inputs, keras.layers.Lambda(lambda x: x * 2)(inputs))
    run_dir = tmp_path / "run"
    (run_dir / "model").mkdir(parents=True)
    model.save(run_dir / "model" / "model.keras")
    (run_dir / "recipe.yaml").write_text("task: toy\n")
    result = CliRunner().invoke(main, ["export", str(run_dir)])
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"Error: {run_dir / 'model' / 'model.keras'}: cannot load the model (safe mode): ")
    assert "lambda" in line.lower()
    try:
        load_backbone(run_dir / "model" / "model.keras")
    except SeqtasksError as error:
        assert "cannot load a Keras model" in str(error) and "lambda" in str(error).lower()
    else:
        raise AssertionError("a backbone with a lambda loaded")


@pytest.mark.parametrize(
    "args, expected",
    [
        (["{root}", "hello"], "{root}: not a SavedModel folder (no saved_model.pb)"),
        (["{root}/missing", "hello"], "{root}/missing: not a SavedModel folder (no saved_model.pb)"),
        (["{root}"], "nothing to predict: give inputs as arguments or with --input FILE"),
        (["{root}", "hello", "--input", "{root}/in.txt"], "give inputs as arguments or with --input, not both"),
        (["{root}", "--input", "{root}/in.txt"], "{root}/in.txt: no such data file"),
    ],
)
def test_predict_refuses_bad_input_with_one_line(tmp_path, args, expected):
    result = CliRunner().invoke(main, ["predict", *(arg.format(root=tmp_path) for arg in args)])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [f"Error: {expected.format(root=tmp_path)}"]


@pytest.mark.slow
@pytest.mark.core
def test_predict_on_an_export_of_no_known_task_names_its_outputs_and_json_still_prints_them(tmp_path):
    import tensorflow as tf

    class Echo(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def serve(self, text):
            return {"echo": text, "length": tf.strings.length(text)}

    module = Echo()
    tf.saved_model.save(module, str(tmp_path / "echo"), signatures={"serving_default": module.serve})
    result = CliRunner().invoke(main, ["predict", str(tmp_path / "echo"), "hello"])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [
        "Error: the model's outputs (echo, length) are not those of a seqtasks task; --json prints them all"
    ]
    result = CliRunner().invoke(main, ["predict", str(tmp_path / "echo"), "hello", "--json"])
    assert result.exit_code == 0, result.output
    assert [json.loads(line) for line in result.stdout.splitlines()] == [{"echo": "hello", "length": 5}]


BOMB = "task: translation\na0: &a0 {x: 1, y: 1}\n" + "".join(
    f"a{n}: &a{n} {{{', '.join(f'k{i}: *a{n - 1}' for i in range(9))}}}\n" for n in range(1, 10)
)
MORE_ROWS = {
    "CoNLL tag without a type": (
        NER, {"train.conll": "John B-PER\nSmith I-\n\nHi O\n"}, [],
        r"train\.conll:2: tag 'I-' is not O, B-TYPE or I-TYPE \(data\.scheme is iob2",
    ),
    "CoNLL line of one column read with the tag counted from the end": (
        NER, {"train.conll": "John B-PER\nO\n"}, [],
        r"train\.conll:2: expected at least 2 columns \(token column 0, tag column -1\); got 1$",
    ),
    "recipe that is a billion laughs bomb of mappings": (
        BOMB, {}, [], r"recipe\.yaml: YAML aliases expand to more than 10000 values \(line 6\); write the values out instead$",
    ),
    "recipe alias inside its own anchor": (
        "task: translation\ndata: &d {x: *d}\n", {}, [],
        r"recipe\.yaml: a YAML alias refers to a value that contains it \(line 2\)$",
    ),
    "true where an integer is expected": (
        TRANSLATION, {"pairs.tsv": PAIRS}, ["--set", "training.epochs=true"],
        r"--set training\.epochs: expected an integer; got true$",
    ),
    "dropout at its exclusive bound": (
        TRANSLATION.replace("encoder: {units: 4}", "encoder: {units: 4, dropout: 1.0}"), {"pairs.tsv": PAIRS}, [],
        r"recipe\.yaml: model\.encoder\.dropout: expected less than 1\.0; got 1\.0 \(line 3\)$",
    ),
    "recipe nested 500 deep": (
        "task: translation\ndata: " + "{a: " * 500 + "1" + "}" * 500 + "\n", {}, [],
        r"recipe\.yaml: YAML nested more than 32 levels deep \(line 2\); a recipe needs at most 4$",
    ),
    "--set nested 500 deep": (
        TRANSLATION, {"pairs.tsv": PAIRS}, ["--set", "data=" + "{a: " * 500 + "1" + "}" * 500],
        r"^Error: --set data: YAML nested more than 32 levels deep \(line 1\); a recipe needs at most 4$",
    ),
    "learning rate NaN": (
        TRANSLATION.replace("epochs: 1", "epochs: 1, learning_rate: .nan"), {"pairs.tsv": PAIRS}, [],
        r"recipe\.yaml: training\.learning_rate: expected a finite number; got nan \(line 4\)$",
    ),
    "seed of 10**20": (
        "seed: 100000000000000000000\n" + TRANSLATION, {"pairs.tsv": PAIRS}, [],
        r"recipe\.yaml: seed: expected at most 4294967295; got 100000000000000000000 \(line 1\)$",
    ),
    "embedding_dim of 10**12": (
        TRANSLATION.replace("embedding_dim: 4", "embedding_dim: 1000000000000"), {"pairs.tsv": PAIRS}, [],
        r"recipe\.yaml: model\.embedding_dim: expected at most 65536; got 1000000000000 \(line 3\)$",
    ),
    "decoding.max_length of 10**12": (
        TRANSLATION, {"pairs.tsv": PAIRS}, ["--set", "model.decoding.max_length=1000000000000"],
        r"^Error: --set model\.decoding\.max_length: expected at most 256; got 1000000000000$",
    ),
    "an integer of 5000 digits": (
        "seed: 1" + "0" * 5000 + "\n" + TRANSLATION, {"pairs.tsv": PAIRS}, [],
        r"recipe\.yaml: invalid YAML: cannot read '1000+'\.\.\. \(5001 characters\) as int \(line 1\)$",
    ),
    "recipe that is a system account file": (
        "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n", {}, [],
        r"recipe\.yaml: expected a mapping of sections at the top level; "
        r"got 'root:x:0:0:root:/root:/bin/bash daemon:x'\.\.\. \(79 characters\)$",
    ),
}


@pytest.mark.parametrize("row", list(MORE_ROWS), ids=list(MORE_ROWS))
def test_more_bad_input_exits_2_with_one_line_naming_it(tmp_path, row):
    recipe, files, extra, expected = MORE_ROWS[row]
    (tmp_path / "recipe.yaml").write_text(recipe, encoding="utf-8")
    _write(tmp_path, files)
    result = CliRunner().invoke(main, ["run", str(tmp_path / "recipe.yaml"), *extra, "--output-dir", str(tmp_path / "runs")])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert re.search(expected, lines[0]), lines[0]
