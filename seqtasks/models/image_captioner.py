import keras
from keras import ops

from seqtasks.layers import AttentionDecoder
from seqtasks.training.losses import TokenMeanLoss
from seqtasks.text.special_ids import PAD_ID


@keras.saving.register_keras_serializable(package="seqtasks")
class ImageCaptioner(TokenMeanLoss, keras.Model):
    """Show, Attend and Tell: an attention decoder writing captions over an image's feature grid.

    The image is a grid of `L = H * W` feature vectors (the annotation
    vectors `a_i`): either computed beforehand by a frozen backbone and given
    as `(batch, L, C)` features, or computed here by a small CNN trained with
    the captioner (`image_encoder`, for data without a pretrained backbone).
    The decoder's initial state is a tanh projection of the mean feature; at
    every step an `AttentionDecoder` attends over the `L` locations (Bahdanau
    attention, optionally gated by `β_t`), and a dense layer gives the word
    logits. While training, the doubly stochastic attention penalty
    `λ · mean_i (1 - Σ_t α_ti)²` (over real caption steps) is added as a model
    loss, pushing the decoder to look at every part of the image over the
    caption. With `decoder={"placement": "before", "deep_output": "linear",
    "gate": True, ...}` the decoder is the paper's: the LSTM reads
    `[E y_{t-1}; ẑ_t]` where `ẑ_t = β_t Σ_i α_ti a_i` is computed from
    `h_{t-1}`, and the word logits are `L_o(E y_{t-1} + L_h h_t + L_z ẑ_t)`
    (eq. 7; the dense layer here is `L_o`).

    Args:
        vocab_size: int, caption vocabulary size (id 0 is padding).
        embedding_dim: int, size of the word embeddings.
        decoder: dict of `AttentionDecoder` arguments.
        image_encoder: optional list of ints, the filters of a small CNN
            (3x3 convolution, ReLU, 2x2 max pooling per entry) that turns
            `(batch, height, width, 3)` images in 0..255 into the grid. `None`:
            the inputs are feature grids.
        grid_head: optional Keras model trained with the captioner that
            turns `(batch, h, w, c)` feature maps into the grid, such as the
            last stage of a pretrained backbone whose earlier stages ran once
            (fine-tuning). Its batch normalisation stays in inference mode.
        feature_dropout: float, dropout on the grid features while training.
        embedding_dropout: float, dropout on the word embeddings `E y_{t-1}`
            the decoder reads while training (the paper's dropout on the
            LSTM's input; its deep output reads them too).
        attention_penalty: float, `λ` of the doubly stochastic penalty.
        scheduled_sampling: float in [0, 1], the probability, while
            training, of reading the model's own word in place of the
            reference's at each caption step after the first (scheduled
            sampling). The words come from a first, teacher-forced pass in
            inference mode without gradients, one drawn from each step's
            distribution (padding never), so the second pass that is trained
            reads a mix of reference and sampled words, all steps at once.
            The probability in effect is the variable `sampling_probability`,
            `scheduled_sampling` until `set_training_progress` moves it.
        **kwargs: other keyword arguments of `keras.Model`.

    Call arguments:
        inputs: a tuple `(images, target_input_ids)`: the feature grids
            `(batch, L, C)` (or images with `image_encoder`) and the caption
            ids `(batch, T)`, starting with the start token (teacher forcing).
        training: bool.

    Returns:
        Logits `(batch, T, vocab_size)` carrying the caption padding mask.

    For decoding, `encode(images)` returns the attention cache and initial
    state and `decode_step(ids, state, cache)` the next logits, state and
    attention weights `(batch, L)`; `attention(images, target_input_ids)`
    gives the weights `(batch, T, L)` used while reading a caption.

    Example:

    >>> import numpy as np
    >>> model = ImageCaptioner(vocab_size=50, embedding_dim=8, decoder={"units": 16, "attention": "bahdanau"})
    >>> grid = np.random.rand(2, 49, 32).astype("float32")
    >>> tuple(model((grid, np.array([[2, 5, 6], [2, 7, 0]]))).shape)
    (2, 3, 50)

    References:
        Xu et al., "Show, Attend and Tell: Neural Image Caption Generation
        with Visual Attention", ICML 2015.
        Bengio et al., "Scheduled Sampling for Sequence Prediction with
        Recurrent Neural Networks", NeurIPS 2015.
        Duckworth et al., "Parallel Scheduled Sampling", 2019 (the two
        passes).
    """

    def __init__(
        self,
        vocab_size,
        embedding_dim=256,
        decoder=None,
        image_encoder=None,
        grid_head=None,
        feature_dropout=0.0,
        attention_penalty=1.0,
        embedding_dropout=0.0,
        scheduled_sampling=0.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if image_encoder is not None and (
            not isinstance(image_encoder, (list, tuple)) or not image_encoder
            or not all(isinstance(f, int) and f > 0 for f in image_encoder)
        ):
            raise ValueError(
                f"Expected image_encoder to be None or a list of positive filter counts. "
                f"Received: image_encoder={image_encoder!r}"
            )
        if image_encoder is not None and grid_head is not None:
            raise ValueError("Expected image_encoder or grid_head, not both.")
        if isinstance(grid_head, dict):
            grid_head = keras.saving.deserialize_keras_object(grid_head)
        if not 0.0 <= feature_dropout < 1.0:
            raise ValueError(f"Expected feature_dropout in [0, 1). Received: feature_dropout={feature_dropout}")
        if not 0.0 <= embedding_dropout < 1.0:
            raise ValueError(
                f"Expected embedding_dropout in [0, 1). Received: embedding_dropout={embedding_dropout}"
            )
        if attention_penalty < 0.0:
            raise ValueError(f"Expected attention_penalty >= 0. Received: attention_penalty={attention_penalty}")
        if not 0.0 <= scheduled_sampling <= 1.0:
            raise ValueError(
                f"Expected scheduled_sampling in [0, 1]. Received: scheduled_sampling={scheduled_sampling}"
            )
        self.vocab_size = vocab_size
        self.embedding_dim = embedding_dim
        self.decoder = dict(decoder or {"units": 64, "attention": "bahdanau"})
        self.image_encoder = None if image_encoder is None else list(image_encoder)
        self.grid_head = grid_head
        self.feature_dropout = float(feature_dropout)
        self.attention_penalty = float(attention_penalty)
        self.embedding_dropout = float(embedding_dropout)
        self.scheduled_sampling = float(scheduled_sampling)
        self.cnn_layers = []
        for index, filters in enumerate(self.image_encoder or []):
            self.cnn_layers += [
                keras.layers.Conv2D(filters, 3, padding="same", activation="relu", dtype=self.dtype_policy, name=f"conv_{index}"),
                keras.layers.MaxPooling2D(2, dtype=self.dtype_policy, name=f"pool_{index}"),
            ]
        self.embedding = keras.layers.Embedding(vocab_size, embedding_dim, mask_zero=True, dtype=self.dtype_policy, name="embedding")
        self.decoder_layer = AttentionDecoder(**self.decoder, dtype=self.dtype_policy, name="decoder")
        self.init_state_dense = keras.layers.Dense(
            self.decoder_layer.flat_state_size,
            activation="tanh",
            dtype=self.dtype_policy,
            name="init_state",
        )
        self.dropout_layer = keras.layers.Dropout(self.feature_dropout, dtype=self.dtype_policy, name="feature_dropout")
        self.embedding_dropout_layer = keras.layers.Dropout(
            self.embedding_dropout, dtype=self.dtype_policy, name="embedding_dropout"
        )
        # Logits in float32 under mixed precision: the loss and the searches need their range.
        self.output_dense = keras.layers.Dense(vocab_size, dtype="float32", name="logits")

    def build(self, input_shape=None):
        if input_shape is None:
            raise ValueError(
                "ImageCaptioner needs its input shapes to build: call it on a batch or "
                "call `build(((None, L, C), (None, None)))`."
            )
        image_shape = tuple(input_shape[0])
        if self.cnn_layers:
            shape = image_shape
            for layer in self.cnn_layers:
                if not layer.built:  # `grid` may have run them before the model was built
                    layer.build(shape)
                shape = layer.compute_output_shape(shape)
            feature_dim = shape[-1]
        elif self.grid_head is not None:
            feature_dim = self.grid_head.compute_output_shape(image_shape)[-1]
        else:
            feature_dim = image_shape[-1]
        self.embedding.build((None, None))
        self.decoder_layer.build((None, None, self.embedding_dim), (None, None, feature_dim))
        self.init_state_dense.build((None, feature_dim))
        self.output_dense.build((None, None, self.decoder_layer.attentional_size))
        if self.scheduled_sampling > 0.0:  # only then: captioners saved without it load as they were
            self.sampling_probability = self.add_weight(
                shape=(),
                initializer=keras.initializers.Constant(self.scheduled_sampling),
                trainable=False,
                name="sampling_probability",
            )
        self.built = True

    def set_training_progress(self, fraction):
        """Sets `sampling_probability` to `scheduled_sampling * fraction`, `fraction` in [0, 1] of training done.

        Training calls it at each epoch's start, so the captioner reads the
        reference alone at first and its own words most at the end.
        """
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"Expected fraction in [0, 1]. Received: fraction={fraction}")
        if self.scheduled_sampling > 0.0:
            self.sampling_probability.assign(self.scheduled_sampling * fraction)

    def scheduled_inputs(self, images, target_ids):
        """`target_ids` `(batch, T)` with each step after the first, padding aside, replaced with probability
        `sampling_probability` by a word drawn from the captioner's distribution for it given the reference before."""
        return self._scheduled_inputs(self._features(images), target_ids)

    def _scheduled_inputs(self, features, target_ids):
        logits = ops.stop_gradient(self.output_dense(self._decode_sequence(features, target_ids, False)[0]))
        never_pad = ops.where(ops.arange(self.vocab_size) == PAD_ID, -1e9, 0.0)
        shape = ops.shape(target_ids)
        drawn = keras.random.categorical(
            ops.reshape(logits + never_pad, (-1, self.vocab_size)), 1, seed=self.decoder_layer.seed_generator
        )
        drawn = ops.cast(ops.reshape(drawn, shape), target_ids.dtype)
        # The word drawn at step t is read at step t + 1.
        previous = ops.concatenate([target_ids[:, :1], drawn[:, :-1]], axis=1)
        swap = ops.logical_and(
            keras.random.uniform(shape, seed=self.decoder_layer.seed_generator) < self.sampling_probability,
            ops.logical_and(ops.arange(shape[1])[None, :] > 0, ops.not_equal(target_ids, PAD_ID)),
        )
        return ops.where(swap, previous, target_ids)

    def grid(self, images, training=None):
        """The feature grid `(batch, L, C)` float, from features or through the CNN."""
        return self.dropout_layer(self._features(images), training=training)

    def _features(self, images):
        x = ops.cast(images, self.compute_dtype)
        if self.cnn_layers or self.grid_head is not None:
            if self.grid_head is not None:
                x = self.grid_head(x, training=False)
            else:
                x = x / 255.0
                for layer in self.cnn_layers:
                    x = layer(x)
            shape = ops.shape(x)
            x = ops.reshape(x, (shape[0], shape[1] * shape[2], shape[3]))
        return x

    def grid_size(self, input_shape):
        """`(h, w)` of the grid for inputs of `input_shape` (no batch), `None` for flat feature inputs."""
        if self.cnn_layers:
            shrink = 2 ** len(self.image_encoder)
            return (input_shape[0] // shrink, input_shape[1] // shrink)
        if self.grid_head is not None:
            return tuple(self.grid_head.compute_output_shape((None,) + tuple(input_shape))[1:3])
        return None

    def _initial_state(self, grid):
        return self.decoder_layer.unflatten_state(self.init_state_dense(ops.mean(grid, axis=1)))

    def _decode_sequence(self, features, target_ids, training):
        grid = self.dropout_layer(features, training=training)
        return self.decoder_layer(
            self.embedding_dropout_layer(self.embedding(target_ids), training=training),
            grid,
            initial_state=self._initial_state(grid),
            training=training,
            return_attention=True,
        )

    def call(self, inputs, training=None):
        images, target_ids = inputs
        features = self._features(images)  # once a step: the sampling pass reads the same grid
        if training and self.scheduled_sampling > 0.0:
            target_ids = self._scheduled_inputs(features, target_ids)
        outputs, weights = self._decode_sequence(features, target_ids, training)
        if training and self.attention_penalty > 0.0:
            self.add_loss(self.attention_penalty * attention_coverage_penalty(weights, target_ids))
        return self.output_dense(outputs)

    def attention(self, images, target_input_ids):
        """Attention weights `(batch, T, L)` while reading the given captions (inference mode)."""
        return self._decode_sequence(self._features(images), target_input_ids, False)[1]

    def encode(self, images):
        """Returns `(cache, state)` for `decode_step`, in inference mode."""
        grid = self.grid(images, training=False)
        cache = self.decoder_layer.prepare_memory(grid)
        state = self.decoder_layer.get_initial_state(ops.shape(grid)[0], self._initial_state(grid))
        return cache, state

    def decode_step(self, ids, state, cache):
        """One step from the previous ids `(batch,)`: `(logits, state, weights)`."""
        embedded = ops.take(self.embedding.embeddings, ops.cast(ids, "int32"), axis=0)
        output, state, weights = self.decoder_layer.step(embedded, state, cache)
        return self.output_dense(output), state, weights

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "embedding_dim": self.embedding_dim,
                "decoder": self.decoder,
                "image_encoder": self.image_encoder,
                "grid_head": None if self.grid_head is None else keras.saving.serialize_keras_object(self.grid_head),
                "feature_dropout": self.feature_dropout,
                "attention_penalty": self.attention_penalty,
                "embedding_dropout": self.embedding_dropout,
                "scheduled_sampling": self.scheduled_sampling,
            }
        )
        return config


def attention_coverage_penalty(weights, target_ids):
    """`mean over batch and locations of (1 - Σ_t α_ti)²`, summing only real caption steps.

    `weights` `(batch, T, L)`, `target_ids` `(batch, T)` with 0 at padding.
    """
    real = ops.cast(ops.not_equal(target_ids, PAD_ID), "float32")
    coverage = ops.sum(ops.cast(weights, "float32") * ops.expand_dims(real, -1), axis=1)
    return ops.mean(ops.square(1.0 - coverage))
