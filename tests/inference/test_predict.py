"""`seqtasks predict`: the images it reads, the errors it gives, the version a base path names."""

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from seqtasks.cli import main
from seqtasks.errors import SeqtasksError
from seqtasks.inference.predict import failure_reason, read_image
from tests.conftest import REPO

PNG = (REPO / "recipes" / "data" / "shapes" / "images" / "dev_000.png").read_bytes()


@pytest.mark.parametrize(
    "content, expected",
    [
        (b"not an image\n", "{path}: not a decodable image (JPEG, PNG or BMP expected)"),
        (b"%PDF-1.7", "{path}: not a decodable image (JPEG, PNG or BMP expected)"),
        (b"GIF89a\x01\x00", "{path}: not a decodable image (JPEG, PNG or BMP expected)"),  # exports refuse GIF
        (b"", "{path}: empty file, not an image"),
        (None, "{path}: no such image file"),
    ],
)
def test_a_file_that_is_no_image_is_named_with_the_reason(tmp_path, content, expected):
    path = tmp_path / "photo.png"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(SeqtasksError) as raised:
        read_image(path)
    assert str(raised.value) == expected.format(path=path)


def test_only_regular_image_files_are_read(tmp_path):
    with pytest.raises(SeqtasksError) as raised:
        read_image("/dev/zero")
    assert str(raised.value) == "/dev/zero: not a regular file"
    with pytest.raises(SeqtasksError) as raised:
        read_image(tmp_path)
    assert str(raised.value) == f"{tmp_path}: cannot read: Is a directory"


@pytest.mark.parametrize("start", [b"\x89PNG\r\n\x1a\n", b"BM"])
def test_files_that_start_as_images_do_are_read_whole(tmp_path, start):
    path = tmp_path / "image"
    path.write_bytes(start + b"rest")
    assert read_image(path) == start + b"rest"


def test_a_jpeg_is_read_whole_and_a_truncated_one_refused_before_decoding(tmp_path):
    import tensorflow as tf

    jpeg = tf.io.encode_jpeg(tf.fill([16, 16, 3], tf.constant(90, tf.uint8))).numpy()
    path = tmp_path / "photo.jpg"
    path.write_bytes(jpeg)
    assert read_image(path) == jpeg
    path.write_bytes(jpeg[: len(jpeg) - 40])
    with pytest.raises(SeqtasksError) as raised:
        read_image(path)
    assert str(raised.value) == f"{path}: a truncated JPEG (its image data does not end)"
    path.write_bytes(b"\xff\xd8\xff\xe0rest")
    with pytest.raises(SeqtasksError, match="a JPEG without a frame header"):
        read_image(path)


def test_a_model_failure_other_than_its_input_keeps_tensorflow_s_error_class():
    import tensorflow as tf

    from seqtasks.errors import ModelFailure
    from seqtasks.inference.predict import Predictor

    class Failing:
        structured_input_signature = ((), {"text": tf.TensorSpec([None], tf.string, name="text")})

        def __call__(self, **inputs):
            raise tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor")

    predictor = Predictor(None, Failing(), "text", signatures={"serving_default": Failing()})
    with pytest.raises(ModelFailure) as raised:
        predictor.run("serving_default", {"text": ["a"]})
    assert raised.value.code == "ResourceExhaustedError"
    assert str(raised.value) == "the model failed: OOM when allocating tensor"
    with pytest.raises(ModelFailure, match="OOM"):
        predictor.outputs(["a"])


def test_the_reason_of_a_graph_error_is_its_line_before_the_node():
    message = (
        "Graph execution error:\n\nDetected at node map/while/DecodeImage defined at (most recent call last):\n"
        '  File "serve.py", line 4, in f\n\nInvalid PNG data, size 60\n'
        "\t [[{{node map/while/DecodeImage}}]] [Op:__inference_f_63]"
    )
    assert failure_reason(message) == "Invalid PNG data, size 60"
    assert failure_reason("Input is empty.\nmore") == "Input is empty."
    wrapped = "Graph execution error:\n\nDetected at node x\nassertion failed: [image[1]: not a JPEG, PNG or BMP image]\n\t [[{{node x}}]]"
    assert failure_reason(wrapped) == "image[1]: not a JPEG, PNG or BMP image"


@pytest.fixture(scope="module")
def image_model(tmp_path_factory):
    """A SavedModel that decodes each image and returns its height, as a captioner's export decodes them."""
    import tensorflow as tf

    class Heights(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="image")])
        def serve(self, image):
            def height(data):
                return tf.shape(tf.io.decode_image(data, channels=3, expand_animations=False))[0]

            return {"height": tf.map_fn(height, image, fn_output_signature=tf.int32)}

    folder = tmp_path_factory.mktemp("heights") / "1"
    module = Heights()
    tf.saved_model.save(module, str(folder), signatures={"serving_default": module.serve})
    return folder


@pytest.mark.slow
def test_a_damaged_image_is_named_with_tensorflows_reason(image_model, tmp_path):
    """It starts as a PNG does, so only decoding finds it broken; the batch is retried to name the one."""
    good, damaged = tmp_path / "good.png", tmp_path / "damaged.png"
    good.write_bytes(PNG)
    damaged.write_bytes(PNG[:60])
    result = CliRunner().invoke(main, ["predict", str(image_model), str(good), str(damaged), str(good), "--json"])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [f"Error: {damaged}: the model rejected the input: Invalid PNG data, size 60"]


@pytest.mark.slow
def test_predict_on_a_base_path_uses_its_newest_version_and_prints_no_tensorflow_log_lines(tmp_path):
    """In a fresh process, as a user runs it: TensorFlow's start-up lines would show there."""
    import tensorflow as tf

    class Tagged(tf.Module):
        def __init__(self, tag):
            super().__init__()
            self.tag = tag

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def serve(self, text):
            return {"echo": text, "version": tf.fill(tf.shape(text), self.tag)}

    for tag in [2, 10]:
        module = Tagged(tag)
        tf.saved_model.save(module, str(tmp_path / "echo" / str(tag)), signatures={"serving_default": module.serve})
    (tmp_path / "echo" / "11").mkdir()  # being written: no saved_model.pb yet
    env = {name: value for name, value in os.environ.items() if name not in ("TF_CPP_MIN_LOG_LEVEL", "GRPC_VERBOSITY")}
    result = subprocess.run(
        [sys.executable, "-m", "seqtasks", "predict", str(tmp_path / "echo"), "hi", "--json"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert [json.loads(line) for line in result.stdout.splitlines()] == [{"echo": "hi", "version": 10}]
    assert result.stderr.splitlines() == [f"SavedModel: {tmp_path / 'echo' / '10'} (the newest version)"]


@pytest.mark.slow
def test_damaged_jpegs_give_one_line_errors_without_the_native_decoder_s_output(image_model, tmp_path):
    """libjpeg writes straight to stderr; as a user runs it, in a fresh process, only the error line shows."""
    import tensorflow as tf

    jpeg = tf.io.encode_jpeg(tf.cast(tf.random.stateless_uniform([32, 32, 3], (1, 2), 0, 255), tf.uint8)).numpy()
    table = jpeg.find(b"\xff\xc4")
    bogus = jpeg[: table + 5] + b"\xff" * 16 + jpeg[table + 21 :]  # a Huffman table libjpeg rejects
    paths = {"good.png": PNG, "truncated.jpg": jpeg[:-60], "bogus.jpg": bogus}
    for name, data in paths.items():
        (tmp_path / name).write_bytes(data)
    env = {name: value for name, value in os.environ.items() if name not in ("TF_CPP_MIN_LOG_LEVEL", "GRPC_VERBOSITY")}
    for name, reason in (("truncated.jpg", "a truncated JPEG (its image data does not end)"),
                         ("bogus.jpg", "the model rejected the input: ")):
        result = subprocess.run(
            [sys.executable, "-m", "seqtasks", "predict", str(image_model), str(tmp_path / "good.png"),
             str(tmp_path / name), "--json"],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
        )
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith(f"Error: {tmp_path / name}: {reason}")


@pytest.mark.slow
def test_a_serving_process_imports_tensorflow_and_the_text_ops_without_keras(fresh_python):
    code = """
import os, sys
from seqtasks.inference.runtime import serving_tensorflow
tf = serving_tensorflow()
from tensorflow.python.framework import op_def_registry
assert "keras" not in sys.modules and "tensorflow_text" not in sys.modules, [m for m in sys.modules if m.startswith(("keras", "tensorflow_text"))]
assert "TF_USE_LEGACY_KERAS" not in os.environ
assert all(op_def_registry.get(op) is not None for op in ("SentencepieceTokenizeOp", "WordpieceTokenizeWithOffsets"))
assert serving_tensorflow() is tf
assert tf.keras.layers.Dense(2)(tf.zeros([1, 3])).shape == (1, 2)  # Keras 3 still comes when asked for
import keras
assert keras.__version__.startswith("3.")
print("ok")
"""
    result = fresh_python(code)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-2000:]


def test_an_export_is_known_by_its_first_output_and_outputs_its_task_declares():
    from seqtasks.inference.predict import _task_of

    assert _task_of("text", {"tags", "tokens"}).name == "ner"  # an NER export of before its entity outputs
    assert _task_of("text", {"tags", "tokens", "token_start", "token_end", "entity_count", "entity_start",
                             "entity_end", "entity_type", "entity_text", "entity_score"}).name == "ner"
    assert _task_of("text", {"translation", "score", "translations", "scores"}).name == "translation"
    assert _task_of("text", {"output", "score"}).name == "toy"
    assert _task_of("text", {"tags", "tokens", "extra"}) is None
    assert _task_of("text", {"tokens"}) is None
    assert _task_of("image", {"tags", "tokens"}) is None
