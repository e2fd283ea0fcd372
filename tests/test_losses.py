import keras
import numpy as np
import pytest

from seqtasks.training.losses import SmoothedSparseCrossentropy

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
