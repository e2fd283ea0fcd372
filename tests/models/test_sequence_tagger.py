import itertools

import keras
import numpy as np
import pytest

from seqtasks.layers.crf import iob2_constraints
from seqtasks.models import SequenceTagger
from tests.support.layer_test_utils import tagger_inputs


def _tagger(output_layer, num_tags=4, **kwargs):
    return SequenceTagger(
        12, 10, num_tags, word_embedding_dim=5, char_embedding_dim=3, char_filters=4,
        encoder={"units": 6, "bidirectional": True}, dropout=0.0, output_layer=output_layer, seed=1, **kwargs,
    )


@pytest.mark.parametrize("output_layer", ["crf", "softmax"])
def test_a_padded_batch_tags_exactly_like_each_sentence_alone(output_layer):
    model = _tagger(output_layer)
    rows = [[3, 4, 5, 6], [7, 8], [9]]
    keras.utils.set_random_seed(0)
    for weight in model.weights:  # non-zero transitions make the CRF matter
        weight.assign(np.random.default_rng(len(weight.path)).normal(size=weight.shape).astype("float32"))
    batch = tagger_inputs(rows)
    together = keras.ops.convert_to_numpy(model.decode(batch))
    potentials = keras.ops.convert_to_numpy(model(batch))
    for index, row in enumerate(rows):
        alone = tagger_inputs([row])
        np.testing.assert_array_equal(together[index, : len(row)], keras.ops.convert_to_numpy(model.decode(alone))[0])
        np.testing.assert_allclose(potentials[index, : len(row)], keras.ops.convert_to_numpy(model(alone))[0], rtol=1e-5, atol=1e-5)
        assert (together[index, len(row) :] == 0).all()


@pytest.mark.slow  # several seconds: the fast tier stays under 3 minutes
def test_crf_loss_is_the_negative_mean_log_likelihood_and_training_learns_the_tags():
    model = _tagger("crf")
    x = tagger_inputs([[3, 4, 5, 6], [7, 8]] * 8)
    y = np.array([[1, 2, 0, 3], [1, 0, 0, 0]] * 8, "int32")
    potentials = model(x)
    expected = -keras.ops.convert_to_numpy(model.crf.log_likelihood(potentials, y, x["words"] != 0)).mean()
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model.compute_loss(x, y, potentials)), expected, rtol=1e-6)
    model.compile(optimizer=keras.optimizers.Adam(0.05))
    history = model.fit(x, y, epochs=25, batch_size=8, verbose=0)
    assert history.history["loss"][-1] < 0.2 * history.history["loss"][0]
    decoded = keras.ops.convert_to_numpy(model.decode(x))
    np.testing.assert_array_equal(decoded[:2], [[1, 2, 0, 3], [1, 0, 0, 0]])


@pytest.mark.parametrize("output_layer", ["crf", "softmax"])
def test_the_loss_of_an_empty_share_of_a_batch_is_zero_not_nan(output_layer):
    """Two replicas split a batch of one sentence 1/0: the empty share must add nothing."""
    model = _tagger(output_layer)
    x = tagger_inputs([[3, 4]])
    potentials = model(x)
    empty = {key: value[:0] for key, value in x.items()}
    loss = keras.ops.convert_to_numpy(model.compute_loss(empty, np.zeros((0, 2), "int32"), potentials[:0]))
    assert loss == 0.0


def test_saves_and_reloads_in_safe_mode(tmp_path):
    constraints = iob2_constraints(["O", "B-PER", "I-PER", "B-LOC"])
    model = _tagger("crf", **constraints)
    x = tagger_inputs([[3, 4, 5], [6]])
    expected = keras.ops.convert_to_numpy(model(x))
    model.save(tmp_path / "tagger.keras")
    restored = keras.models.load_model(tmp_path / "tagger.keras", safe_mode=True)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(restored(x)), expected, rtol=1e-6)
    assert restored.crf is not None
    assert restored.crf.allowed_transitions == restored.allowed_transitions == constraints["allowed_transitions"]
    assert restored.crf.allowed_starts == restored.allowed_starts == constraints["allowed_starts"]


IOB2 = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def _valid_iob2(path):
    names = [IOB2[tag] for tag in path]
    return all(not tag.startswith("I-") or prev in ("B-" + tag[2:], tag) for prev, tag in zip(["O"] + names, names))


@pytest.mark.parametrize("output_layer", ["crf", "softmax"])
def test_decoding_gives_the_best_valid_iob2_path_in_both_output_modes(output_layer):
    model = _tagger(output_layer, num_tags=5, **iob2_constraints(IOB2))
    x = tagger_inputs([[3, 4, 5, 6], [7, 8]])
    model(x)
    # Inside tags score highest on their own, so each token's own best tag makes invalid paths.
    model.potentials.bias.assign(np.array([0.0, 0.0, 3.0, 0.0, 2.5], "float32"))
    potentials = keras.ops.convert_to_numpy(model(x))
    assert (potentials.argmax(-1)[:, 0] % 2 == 0).all() and (potentials.argmax(-1)[:, 0] > 0).all()
    if output_layer == "softmax":  # the allowed path of the most probable tags, token by token
        scores = potentials - np.log(np.exp(potentials).sum(-1, keepdims=True))
    else:  # untrained transitions are 0: the path's score is its potentials' sum
        scores = potentials
    decoded = keras.ops.convert_to_numpy(model.decode(x))
    for row, length in enumerate((4, 2)):
        paths = [p for p in itertools.product(range(5), repeat=length) if _valid_iob2(p)]
        best = max(paths, key=lambda path: sum(scores[row, t, tag] for t, tag in enumerate(path)))
        assert tuple(decoded[row, :length]) == best
        assert (decoded[row, length:] == 0).all()


def test_rejects_an_unknown_output_layer():
    with pytest.raises(ValueError, match=r"Received: output_layer='hmm'"):
        SequenceTagger(10, 10, 3, output_layer="hmm")


def test_crf_runs_in_a_traced_function_of_unknown_length_down_to_one_token():
    import tensorflow as tf

    model = _tagger("crf")

    @tf.function(input_signature=[{name: tf.TensorSpec([None, None] + ([4] if name == "characters" else []), tf.int32)
                                   for name in ("words", "characters", "casing")}])
    def decode(inputs):
        return model.decode(inputs)

    for rows in ([[3]], [[3, 4, 5], [6]]):
        x = tagger_inputs(rows)
        np.testing.assert_array_equal(decode(x).numpy(), keras.ops.convert_to_numpy(model.decode(x)))


def test_singletons_read_as_unknown_at_about_their_rate_in_training_only():
    model = _tagger("crf", singleton_unk=0.5, first_singleton=8)
    model.build()
    rng = np.random.default_rng(0)
    words = rng.integers(1, 12, size=(200, 50)).astype("int32")
    words[:, 40:] = 0  # padding
    read = np.stack([keras.ops.convert_to_numpy(model.words_read(words, training=True)) for _ in range(4)])
    singleton, frequent = words >= 8, (words > 1) & (words < 8)
    replaced = read != words
    assert np.all(read[replaced] == 1)  # [UNK]
    assert not replaced[:, frequent].any() and not replaced[:, words == 0].any()
    assert abs(replaced[:, singleton].mean() - 0.5) < 0.02  # about 12,000 draws
    assert 0 < replaced[0, singleton].mean() and (replaced[0] != replaced[1]).any()  # drawn anew at each reading
    np.testing.assert_array_equal(model.words_read(words, training=False), words)
    np.testing.assert_array_equal(model.words_read(words), words)


def test_singleton_replacement_changes_training_outputs_but_not_decoding_or_inference():
    rows = [[8, 9, 10, 11, 2], [9, 11, 3]]
    plain = _tagger("crf")
    model = _tagger("crf", singleton_unk=0.9, first_singleton=8)
    plain.build(), model.build()
    model.set_weights(plain.get_weights())
    inputs = tagger_inputs(rows)
    np.testing.assert_array_equal(plain(inputs, training=False), model(inputs, training=False))
    np.testing.assert_array_equal(plain.decode(inputs), model.decode(inputs))
    np.testing.assert_array_equal(plain(inputs, training=True), plain(inputs, training=True))  # dropout 0
    assert not np.allclose(model(inputs, training=True), plain(inputs, training=True))
    copy = SequenceTagger.from_config(model.get_config())
    assert (copy.singleton_unk, copy.first_singleton) == (0.9, 8)


@pytest.mark.parametrize("output_layer", ["crf", "softmax"])
def test_with_tag_names_evaluation_logs_the_decoded_tags_seqeval_f1(output_layer):
    from seqeval.metrics import f1_score

    model = _tagger(output_layer, num_tags=5, tag_names=IOB2, **iob2_constraints(IOB2))
    rows = [[3, 4, 5, 6], [7, 8], [9, 10, 11], [4]]
    x = tagger_inputs(rows)
    rng = np.random.default_rng(1)
    for weight in model.weights:
        weight.assign(rng.normal(size=weight.shape).astype("float32"))
    decoded = keras.ops.convert_to_numpy(model.decode(x))
    y = np.where(x["words"] > 0, decoded, 0).astype("int32")
    y[3, 0] = 3 if y[3, 0] != 3 else 1  # gold that the model gets wrong beside gold it gets right
    y[2, :3] = [0, 1, 2]
    model.compile(optimizer="adam")
    logs = model.evaluate(x, y, batch_size=2, verbose=0, return_dict=True)
    gold = [[IOB2[t] for t in y[i, : len(r)]] for i, r in enumerate(rows)]
    predicted = [[IOB2[t] for t in decoded[i, : len(r)]] for i, r in enumerate(rows)]
    assert logs["f1"] == pytest.approx(f1_score(gold, predicted), abs=1e-6)
    assert 0.0 < logs["f1"] < 1.0
    plain = _tagger(output_layer, num_tags=5)
    plain.compile(optimizer="adam")
    assert set(plain.evaluate(x, y, verbose=0, return_dict=True)) == {"loss"}


def test_tag_names_must_name_every_tag():
    with pytest.raises(ValueError, match=r"Expected 4 tag names, one per tag. Received: tag_names=\['O'\]"):
        _tagger("crf", tag_names=["O"])
