"""`SmoothedSparseCrossentropy`, and what a model's loss needs of the distribution strategy.

What a model's loss needs of the distribution strategy comes in as an argument: `use_replicas(...)`.
The models weigh each replica of a distributed step by its share of the
batch (`seqtasks.training.losses.replica_share`) without importing the
runtime: whoever compiles them passes the strategy's replicas
(`seqtasks.training.distribute.STEP_REPLICAS`) to `use_replicas`. tests/training/test_distribute.py
trains on two replicas against one device; these check the plumbing on
tiny in-process models, with a stand-in for a two-replica step.
"""

import warnings

import keras
import numpy as np
import pytest

from seqtasks.models import Seq2Seq, SequenceTagger
from seqtasks.training.distribute import STEP_REPLICAS
from seqtasks.training.losses import ONE_REPLICA, SmoothedSparseCrossentropy, replica_share
from tests.support.layer_test_utils import tagger_inputs


RNG = np.random.default_rng(5)
LOGITS = RNG.normal(size=(2, 3, 6)).astype("float32")
LABELS = np.array([[1, 4, 0], [2, 0, 0]])


def _reference(epsilon, mask):
    log_probs = LOGITS - np.log(np.exp(LOGITS).sum(-1, keepdims=True))
    nll = -np.take_along_axis(log_probs, LABELS[..., None], -1)[..., 0]
    loss = (1 - epsilon) * nll + epsilon * -log_probs.mean(-1)
    return (loss * mask).sum() / mask.sum()


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.5])
def test_matches_the_formula_and_skips_masked_steps(epsilon):
    mask = LABELS != 0
    logits = keras.ops.convert_to_tensor(LOGITS)
    logits._keras_mask = keras.ops.convert_to_tensor(mask)
    loss = SmoothedSparseCrossentropy(epsilon)(LABELS, logits)
    np.testing.assert_allclose(float(loss), _reference(epsilon, mask), rtol=1e-5)


def test_config_round_trip_and_validation():
    loss = SmoothedSparseCrossentropy(0.2)
    assert SmoothedSparseCrossentropy.from_config(loss.get_config()).label_smoothing == 0.2
    with pytest.raises(ValueError, match=r"Expected label_smoothing in \[0, 1\). Received: label_smoothing=1.0"):
        SmoothedSparseCrossentropy(1.0)


@pytest.mark.parametrize("epsilon", [0.0, 0.1])
def test_the_gradient_is_the_smoothed_target_taken_from_the_softmax(epsilon):
    tf = pytest.importorskip("tensorflow")
    if keras.backend.backend() != "tensorflow":
        pytest.skip("the gradient is taken with TensorFlow's tape")
    mask = LABELS != 0
    logits = tf.constant(LOGITS)
    with tf.GradientTape() as tape:
        tape.watch(logits)
        masked = tf.identity(logits)
        masked._keras_mask = tf.constant(mask)
        loss = SmoothedSparseCrossentropy(epsilon)(LABELS, masked)
    softmax = np.exp(LOGITS) / np.exp(LOGITS).sum(-1, keepdims=True)
    target = (1 - epsilon) * np.eye(LOGITS.shape[-1])[LABELS] + epsilon / LOGITS.shape[-1]
    expected = (softmax - target) * mask[..., None] / mask.sum()
    np.testing.assert_allclose(tape.gradient(loss, logits).numpy(), expected, atol=1e-6)


class TwoReplicas:
    """A stand-in for a step on two replicas, the other of which counts `other`."""

    def __init__(self, other):
        self.other = other
        self.means = []

    def count(self):
        return 2

    def mean(self, value):
        self.means.append(float(keras.ops.convert_to_numpy(value)))
        return (value + self.other) / 2


def _numpy(value):
    return float(keras.ops.convert_to_numpy(value))


def _tagger(output_layer):
    return SequenceTagger(
        12, 10, 4, word_embedding_dim=5, char_embedding_dim=3, char_filters=4,
        encoder={"units": 6, "bidirectional": True}, dropout=0.0, output_layer=output_layer, seed=1,
    )


def test_a_replicas_share_is_its_count_over_the_mean_count_and_one_on_one_device():
    assert replica_share(3.0, ONE_REPLICA) == 1.0
    np.testing.assert_allclose(_numpy(replica_share(3.0, TwoReplicas(5.0))), 3.0 / 4.0)
    # A replica with nothing of the batch weighs nothing; a mean of nothing does not divide by zero.
    assert _numpy(replica_share(0.0, TwoReplicas(5.0))) == 0.0
    assert _numpy(replica_share(0.0, TwoReplicas(0.0))) == 0.0


def test_the_step_replicas_outside_a_distributed_step_are_one():
    assert STEP_REPLICAS.count() == 1
    assert replica_share(7.0, STEP_REPLICAS) == 1.0


@pytest.mark.parametrize("output_layer", ["crf", "softmax"])
def test_the_tagger_weighs_its_loss_by_the_replicas_it_was_given(output_layer):
    model = _tagger(output_layer)
    x = tagger_inputs([[3, 4, 5, 6], [7, 8]])
    y = np.array([[1, 2, 0, 3], [1, 0, 0, 0]], "int32")
    potentials = model(x)
    assert model.replicas is ONE_REPLICA  # given none: one device
    alone = _numpy(model.compute_loss(x, y, potentials))
    replicas = TwoReplicas(10.0)
    model.use_replicas(replicas)
    weighted = _numpy(model.compute_loss(x, y, potentials))
    # The CRF's mean is over sentences (2 here), the softmax's over real tokens (6 here).
    count = 2.0 if output_layer == "crf" else 6.0
    assert replicas.means == [count]
    # Its share of the two replicas' mean count, and halved: Keras sums the replicas' gradients.
    np.testing.assert_allclose(weighted, alone * count / ((count + 10.0) / 2) / 2, rtol=1e-6)
    model.use_replicas(ONE_REPLICA)
    np.testing.assert_allclose(_numpy(model.compute_loss(x, y, potentials)), alone, rtol=1e-6)


def test_the_encoder_decoder_weighs_its_token_mean_by_the_replicas_it_was_given():
    model = Seq2Seq(11, 13, 4, encoder={"units": 4}, decoder={"units": 4, "attention": "none"})
    source = np.array([[5, 6, 7], [8, 9, 0]], "int32")
    target_in = np.array([[1, 4, 5], [1, 6, 0]], "int32")
    target_out = np.array([[4, 5, 2], [6, 2, 0]], "int32")
    logits = model((source, target_in))
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=SmoothedSparseCrossentropy())
    alone = _numpy(model.compute_loss((source, target_in), target_out, logits))
    replicas = TwoReplicas(3.0)
    model.use_replicas(replicas)
    weighted = _numpy(model.compute_loss((source, target_in), target_out, logits))
    assert replicas.means == [5.0]  # the real target tokens
    np.testing.assert_allclose(weighted, alone * 5.0 / 4.0, rtol=1e-6)


def test_the_replicas_are_no_part_of_the_saved_model_which_loads_and_compiles_as_before(tmp_path):
    model = _tagger("crf")
    model.build()
    model.compile(optimizer=keras.optimizers.SGD(0.1))
    model.use_replicas(TwoReplicas(1.0))
    model.save(tmp_path / "tagger.keras")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. Keras' "`compile()` was not called as part of model loading"
        loaded = keras.models.load_model(tmp_path / "tagger.keras")
    assert loaded.compiled and loaded.replicas is ONE_REPLICA
    assert loaded.get_config() == model.get_config()
    for saved, read in zip(model.weights, loaded.weights):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(saved), keras.ops.convert_to_numpy(read))


def test_the_tasks_compile_their_models_with_the_step_replicas(tmp_path):
    from seqtasks.encoder_decoder.training import compile_model
    from seqtasks.recipe import load_recipe
    from seqtasks.tasks import make_task

    (tmp_path / "ner.yaml").write_text("task: ner\ndata:\n  path: x.conll\n")
    tagger = _tagger("crf")
    tagger.build()
    make_task(load_recipe(tmp_path / "ner.yaml")).compile_model(tagger)
    assert tagger.replicas is STEP_REPLICAS
    recipe = load_recipe("recipes/translation.yaml")
    encoder_decoder = Seq2Seq(11, 13, 4, encoder={"units": 4}, decoder={"units": 4})
    compile_model(encoder_decoder, recipe.training)
    assert encoder_decoder.replicas is STEP_REPLICAS
    # A model of a task's own, which weighs nothing by replicas, is compiled as before.
    plain = keras.Sequential([keras.Input((3,), dtype="int32"), keras.layers.Embedding(13, 13)])
    compile_model(plain, recipe.training)
    assert plain.compiled and not hasattr(plain, "replicas")
