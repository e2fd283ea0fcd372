"""The captioning task end to end on a slice of the shipped shapes sample."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from seqtasks.export.serving_limits import MAX_IMAGE_PIXELS
from seqtasks.recipe import load_recipe
from seqtasks.tasks.captioning.evaluation import grid_shape_of
from tests.conftest import REPO, check_eval_export_predict, run_recipe, seqtasks_command, serve_in_tensorflow_only
from tests.support.image_bytes import GIF, bmp_image, png_header
from tests.support.trained_runs import CAPTIONING, CAPTIONING_ENSEMBLE


SHAPES = REPO / "recipes" / "data" / "shapes"


@pytest.fixture(scope="module")
def caption_run(run_cache):
    """A slice of the shipped shapes with Show, Attend and Tell's published decoder (`trained_runs.CAPTIONING`)."""
    return run_cache.get(CAPTIONING)


@pytest.mark.slow
def test_run_reports_bleu_1_to_4_and_writes_captions_and_overlays(caption_run):
    _, run_dir, output = caption_run
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert set(metrics["validation"]) == {"bleu_1", "bleu_2", "bleu_3", "bleu_4"}
    assert metrics["validation"]["bleu_1"] >= metrics["validation"]["bleu_4"] >= 0.0
    assert metrics["sacrebleu_signature"].startswith("nrefs:3|")
    rows = [line.split("\t") for line in (run_dir / "captions.tsv").read_text().splitlines()]
    assert [row[0] for row in rows] == [f"dev_{i:03d}.png" for i in range(8)]
    assert all(len(row[2].split(" | ")) == 3 for row in rows)
    assert sorted(p.name for p in (run_dir / "attention").glob("*.png")) == [f"dev_{i:03d}.png" for i in range(4)]
    assert "Sample captions:" in output


@pytest.mark.slow  # several seconds: the fast tier stays under 3 minutes
def test_saved_model_captions_encoded_images_like_the_run_and_refuses_corrupt_ones(caption_run):
    root, run_dir, _ = caption_run
    expected = [line.split("\t")[1] for line in (run_dir / "captions.tsv").read_text().splitlines()]
    png = [(SHAPES / "images" / f"dev_{i:03d}.png").read_bytes() for i in range(3)]
    jpeg = tf.io.encode_jpeg(tf.io.decode_png(png[0]), quality=95).numpy()
    bmp = bmp_image(tf.io.decode_png(png[2], channels=3).numpy())
    out = serve_in_tensorflow_only(
        root / "saved_models" / "captioning" / "1",
        {
            "png": png, "jpeg": [jpeg], "empty": [], "corrupt": [png[0], b"not an image"], "after": [png[1]],
            "thousand": png[:2] * 500, "bmp": [bmp], "gif": [GIF], "blank": [b"", png[0]],
            # Refused from the header alone: nothing of the size it declares is allocated.
            "huge": [png[0], png_header(MAX_IMAGE_PIXELS + 1, 1)], "wide": [png_header(2**32 - 1, 2**32 - 1)],
            "broken": [png[0][:60]],
        },
        input_name="image",
    )
    assert out["png"]["caption"]["value"] == expected[:3]
    assert out["png"]["score"]["shape"] == [3]
    assert out["jpeg"]["caption"]["shape"] == [1] and isinstance(out["jpeg"]["caption"]["value"][0], str)
    assert out["empty"]["caption"]["shape"] == [0]
    assert "assertion failed: [image[1]: not a JPEG, PNG or BMP image]" in out["corrupt"]["error"]
    assert "assertion failed: [image[0]: not a JPEG, PNG or BMP image]" in out["gif"]["error"]
    assert "assertion failed: [image[0]: not a JPEG, PNG or BMP image]" in out["blank"]["error"]
    assert (
        f"assertion failed: [image[1]: too large ({MAX_IMAGE_PIXELS + 1} x 1 pixels; at most {MAX_IMAGE_PIXELS} are read): "
        "scale it down first]"
    ) in out["huge"]["error"]
    assert f"image[0]: too large ({2**32 - 1} x {2**32 - 1} pixels;" in out["wide"]["error"]
    assert "PNG" in out["broken"]["error"]  # a sound header over broken data: the decoder's own message
    assert out["after"]["caption"]["value"] == expected[1:2]  # the server still works
    assert out["thousand"]["caption"]["value"] == expected[:2] * 500
    assert out["bmp"]["caption"]["value"] == expected[2:3]  # the same pixels as the PNG


@pytest.mark.slow
def test_a_frozen_backbone_file_is_run_once_and_its_features_cached(tmp_path):
    inputs = keras.Input((64, 64, 3))
    grid = keras.layers.Conv2D(8, 3, strides=16, padding="same", activation="relu")(inputs / 255.0)
    keras.Model(inputs, grid).save(tmp_path / "backbone.keras")
    overrides = [
        "model.backbone.type=file",
        f"model.backbone.path={tmp_path / 'backbone.keras'}",
        f"data.feature_cache={tmp_path / 'cache'}",
        "export.enabled=false",
        "training.epochs=1",
        "data.max_train_images=20",
        "data.max_validation_images=4",
    ]
    _, first = run_recipe(REPO / "recipes" / "captioning.yaml", tmp_path / "a", *overrides)
    assert "Image features: 20 computed" in first and "Image features: 4 computed" in first
    assert len(list((tmp_path / "cache").glob("features-*.npy"))) == 2
    run_dir, second = run_recipe(
        REPO / "recipes" / "captioning.yaml", tmp_path / "b", *overrides, "data.mirror_images=true"
    )
    assert "Image features: 20 from the cache" in second and "Image features: 4 from the cache" in second
    assert "Image features: 20 mirrored computed" in second  # the validation images are never mirrored
    assert len(list((tmp_path / "cache").glob("features-*.npy"))) == 3
    assert json.loads((run_dir / "metrics.json").read_text())["parameters"] > 0


@pytest.mark.slow
def test_fine_tuning_trains_the_backbone_head_and_the_export_uses_it(tmp_path):
    inputs = keras.Input((64, 64, 3))
    x = keras.layers.Conv2D(6, 3, strides=8, padding="same", activation="relu", name="stem")(inputs / 255.0)
    grid = keras.layers.Conv2D(8, 3, strides=2, padding="same", activation="relu", name="last_stage")(x)
    backbone = keras.Model(inputs, grid)
    backbone.save(tmp_path / "backbone.keras")
    root = tmp_path / "out"
    run_dir, output = run_recipe(
        REPO / "recipes" / "captioning.yaml",
        root / "runs",
        "model.backbone.type=file",
        f"model.backbone.path={tmp_path / 'backbone.keras'}",
        "model.backbone.fine_tune_from=stem",
        f"export.directory={root / 'saved_models'}",
        "training.epochs=1",
        "data.max_train_images=24",
        "data.max_validation_images=3",
    )
    cached = np.load(next((root / "runs" / "feature_cache").glob("features-*.npy")))
    assert cached.shape[1:] == (8, 8, 6)  # the stem's maps: the head runs in the captioner
    from seqtasks.models import ImageCaptioner

    model = keras.models.load_model(
        run_dir / "model" / "model.keras", custom_objects={"ImageCaptioner": ImageCaptioner}, safe_mode=True
    )
    assert model.grid_size((8, 8, 6)) == (4, 4)
    trained = model.grid_head.get_layer("last_stage").kernel.numpy()
    assert not np.allclose(trained, backbone.get_layer("last_stage").kernel.numpy())
    expected = [line.split("\t")[1] for line in (run_dir / "captions.tsv").read_text().splitlines()]
    png = [(SHAPES / "images" / f"dev_{i:03d}.png").read_bytes() for i in range(3)]
    out = serve_in_tensorflow_only(root / "saved_models" / "captioning" / "1", {"png": png}, input_name="image")
    assert out["png"]["caption"]["value"] == expected
    import seqtasks

    captions = seqtasks.load(root / "saved_models" / "captioning").caption(
        [SHAPES / "images" / f"dev_{i:03d}.png" for i in range(3)], batch_size=2
    )
    assert [caption.text for caption in captions] == expected


@pytest.mark.slow
def test_an_ensemble_run_trains_its_captioners_apart_and_evaluates_and_serves_them_together(run_cache):
    # The run also samples its own words (scheduled sampling) and keeps the epoch of the best dev BLEU-4.
    from seqtasks.models import ImageCaptioner, ImageCaptionerEnsemble

    root, run_dir, _ = run_cache.get(CAPTIONING_ENSEMBLE)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    model = keras.models.load_model(run_dir / "model" / "model.keras", safe_mode=True, compile=False)
    assert isinstance(model, ImageCaptionerEnsemble) and model.members == 2
    assert all(isinstance(member, ImageCaptioner) for member in model.member_models)
    assert metrics["parameters"] == model.count_params() == 2 * model.member_models[0].count_params()
    assert metrics["averaging"]["last"] == 2 and metrics["averaging"]["kept"] in ("average", "best")
    assert len(metrics["history"]["token_accuracy"]) == len(metrics["history"]["val_loss"]) == 2
    # Each epoch's dev BLEU-1..4 is logged; the epoch kept is the best by BLEU-4, which the evaluation finds again.
    assert all(len(metrics["history"][f"val_bleu_{n}"]) == 2 for n in range(1, 5))
    assert metrics["averaging"]["best"] == pytest.approx(max(metrics["history"]["val_bleu_4"]))
    # The sampling probability rose to its setting at the last epoch.
    assert [float(keras.ops.convert_to_numpy(m.sampling_probability)) for m in model.member_models] == [0.5, 0.5]
    # The members train apart: their CNNs differ.
    first, second = (keras.ops.convert_to_numpy(member.cnn_layers[0].kernel) for member in model.member_models)
    assert not np.allclose(first, second)
    rows = [line.split("\t") for line in (run_dir / "captions.tsv").read_text().splitlines()]
    # The export decodes with both members together, as the run's evaluation did.
    png = [(SHAPES / "images" / row[0]).read_bytes() for row in rows[:3]]
    out = serve_in_tensorflow_only(root / "saved_models" / "captioning" / "1", {"png": png}, input_name="image")
    assert out["png"]["caption"]["value"] == [row[1] for row in rows[:3]]


def test_dev_bleu_is_scored_only_when_monitored_with_one_decode_built_per_model(monkeypatch):
    import seqtasks.encoder_decoder.decoding as decoding
    from seqtasks.tasks.captioning.task import CaptioningTask

    path = REPO / "recipes" / "captioning.yaml"
    validation = {"a.jpg": ["A red square .", "a red box"], "b.jpg": ["A blue circle on top"]}
    assert CaptioningTask(load_recipe(path)).validation_scores(validation) is None  # monitors val_loss
    task = CaptioningTask(load_recipe(path, ["training.monitor=val_bleu_4"]))
    built = []
    monkeypatch.setattr(decoding, "make_decode", lambda model, settings: built.append(model) or f"decode {model}")
    captioned = {"good": ["a red square", "a blue circle on top"], "bad": ["dog", "cat"]}

    def captions(model, names, decode):
        assert decode == f"decode {model}" and names == ["a.jpg", "b.jpg"]
        return None, None, captioned[model]

    task._captions = captions
    score = task.validation_scores(validation)
    good = score("good")
    assert sorted(good) == ["val_bleu_1", "val_bleu_2", "val_bleu_3", "val_bleu_4"]
    assert list(good.values()) == pytest.approx([100.0] * 4)  # each caption matches a cleaned reference
    assert score("bad")["val_bleu_1"] == 0.0
    score("good")
    assert built == ["good", "bad"]


@pytest.mark.slow
def test_a_finished_run_is_re_evaluated_with_other_decoding_settings(caption_run, tmp_path):
    from seqtasks.lifecycle.runner import Runner

    _, run_dir, _ = caption_run.copy_to(tmp_path / "copy")  # evaluating rewrites the run's outputs
    metrics = Runner.open(run_dir, ["model.decoding.beam_width=1"]).evaluate()
    assert metrics["decoding"]["beam_width"] == 1 and "export" not in metrics
    assert set(metrics["validation"]) == {"bleu_1", "bleu_2", "bleu_3", "bleu_4"}


@pytest.mark.slow
def test_overlay_grid_matches_the_cnn_grid(caption_run):
    _, run_dir, _ = caption_run
    from seqtasks.models import ImageCaptioner

    model = keras.models.load_model(
        run_dir / "model" / "model.keras", custom_objects={"ImageCaptioner": ImageCaptioner}, safe_mode=True
    )
    assert grid_shape_of(model, (64, 64, 3), 64) == (8, 8)
    grid = model.grid(np.zeros((1, 64, 64, 3), "uint8"))
    assert tuple(grid.shape) == (1, 64, 64)


@pytest.mark.slow
def test_eval_export_and_predict_commands(caption_run, tmp_path):
    _, run_dir, _ = caption_run.copy_to(tmp_path / "copy")  # eval writes into the run folder
    names = [f"dev_{i:03d}.png" for i in range(8)]
    captions = [line for line in (SHAPES / "shapes.token.txt").read_text().splitlines() if line.split("#")[0] in names]
    data = tmp_path / "dev.token.txt"
    data.write_text("\n".join(captions) + "\n")
    recorded = json.loads((run_dir / "metrics.json").read_text())["validation"]

    def examples(folder):
        rows = [line.split("\t") for line in (folder / "captions.tsv").read_text().splitlines()[:3]]
        return [SHAPES / "images" / row[0] for row in rows], [row[1] for row in rows]

    check_eval_export_predict(run_dir, data, examples, tmp_path / "exports", recorded)
    (exported,) = (tmp_path / "exports" / "captioning").iterdir()
    (tmp_path / "notes.png").write_text("not an image")
    result = seqtasks_command("predict", exported, SHAPES / "images" / names[0], tmp_path / "notes.png", expect=2)
    (line,) = result.stderr.strip().splitlines()
    assert line == f"Error: {tmp_path / 'notes.png'}: not a decodable image (JPEG, PNG or BMP expected)"
    result = seqtasks_command("predict", exported, tmp_path / "missing.jpg", expect=2)
    assert f"{tmp_path / 'missing.jpg'}: no such image file" in result.stderr


@pytest.mark.slow
def test_an_export_with_n_best_returns_the_best_captions_best_first(caption_run, tmp_path):
    import tensorflow as tf

    _, run_dir, _ = caption_run
    seqtasks_command("export", run_dir, "--set", f"export.directory={tmp_path}", "--set", "model.decoding.n_best=2")
    image = SHAPES / "images" / "dev_000.png"
    served = tf.saved_model.load(str(tmp_path / "captioning" / "1")).signatures["serving_default"](
        image=tf.constant([image.read_bytes()] * 2)
    )
    assert set(served) == {"caption", "score", "captions", "scores"}
    assert served["captions"].shape == served["scores"].shape == (2, 2)
    np.testing.assert_array_equal(served["caption"].numpy(), served["captions"].numpy()[:, 0])
    assert served["scores"].numpy()[0, 0] >= served["scores"].numpy()[0, 1]
    lines = seqtasks_command("predict", tmp_path / "captioning", image, "--n-best", 2).stdout.splitlines()
    assert [line.split("\t")[1] for line in lines] == [c.decode() for c in served["captions"].numpy()[0]]


@pytest.mark.slow
def test_the_export_s_attention_and_settings_signatures_caption_as_serving_default(caption_run):
    import seqtasks

    root, _, _ = caption_run
    exported = seqtasks.load(root / "saved_models" / "captioning")
    images = [SHAPES / "images" / "dev_000.png", (SHAPES / "images" / "dev_001.png").read_bytes()]
    captions = exported.caption(images)
    rows = exported.attention(images)
    for row, caption in zip(rows, captions):
        height, width = row["grid"]
        assert row["caption"] == caption.text and row["tokens"][-1] == "[END]"
        assert row["attention"].shape == (len(row["tokens"]), height * width) and height == width > 1
        assert np.allclose(row["attention"].sum(axis=1), 1.0, atol=1e-4)
    decoding = exported.decoding_defaults()
    inputs = {"image": [image if isinstance(image, bytes) else image.read_bytes() for image in images]}
    inputs.update({key: [value] for key, value in decoding.items()})
    settings = exported.run_signature("with_settings", inputs)
    assert [text.decode() for text in settings["caption"]] == [caption.text for caption in captions]
    assert settings["captions"].shape == (2, decoding["n_best"])


@pytest.mark.slow
def test_the_served_captioner_takes_image_bytes_only_while_the_python_api_reads_paths(caption_run):
    import base64

    from tests.support.serving_support import post_json, running_server

    import seqtasks

    root, run_dir, _ = caption_run
    expected = [line.split("\t")[1] for line in (run_dir / "captions.tsv").read_text().splitlines()]
    path = SHAPES / "images" / "dev_000.png"
    encoded = {"b64": base64.b64encode(path.read_bytes()).decode()}
    with running_server(root / "saved_models" / "captioning") as url:
        base = url + "/v1/models/captioning"
        for endpoint in (":predict", ":attention"):
            status, answer = post_json(base + endpoint, {"instances": [str(path)]})
            assert status == 400 and "a server never reads a file path" in answer["error"], answer
        assert post_json(base + ":predict", {"instances": [encoded]})[1]["predictions"][0]["caption"] == expected[0]
        status, answer = post_json(base + ":attention", {"instances": [encoded]})
        assert status == 200 and answer["attention"][0]["caption"] == expected[0]
    local = seqtasks.load(root / "saved_models" / "captioning")
    assert local.caption(str(path)).text == expected[0]  # a local caller may still name a file
    assert local.attention(str(path))["caption"] == expected[0]


@pytest.mark.slow
def test_caption_samples_through_the_api_seeded_and_best_first(caption_run):
    import seqtasks

    root, _, _ = caption_run
    exported = seqtasks.load(root / "saved_models" / "captioning")
    image = SHAPES / "images" / "dev_002.png"
    sampled = exported.caption(image, num_samples=4, n_best=4, temperature=1.5, seed=3)
    assert sampled.n_best[0] == (sampled.text, sampled.score) and len(sampled.n_best) == 4
    assert [score for _, score in sampled.n_best] == sorted((score for _, score in sampled.n_best), reverse=True)
    assert exported.caption([image], num_samples=4, n_best=4, temperature=1.5, seed=3) == [sampled]
    # The recipe's own settings, given, caption as serving_default does.
    plain = exported.caption(image)
    assert plain.n_best is None
    assert exported.caption(image, **exported.decoding_defaults()).text == plain.text
