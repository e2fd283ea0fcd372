import dataclasses

import keras
from keras import ops

from seqtasks.layers import AttentionDecoder, StackedRNN
from seqtasks.training.losses import TokenMeanLoss
from seqtasks.text.special_ids import PAD_ID


def decoder_arguments(decoder_config, attention_config, seed=None, **extra):
    """`AttentionDecoder` arguments from a recipe's `DecoderConfig` and `AttentionConfig` sections."""
    arguments = dataclasses.asdict(decoder_config)
    arguments.update(
        attention=attention_config.type,
        score=attention_config.score,
        attention_units=attention_config.units,
        normalize=attention_config.normalize,
        scale=attention_config.scale,
        seed=seed,
        **extra,
    )
    return arguments


@keras.saving.register_keras_serializable(package="seqtasks")
class Seq2Seq(TokenMeanLoss, keras.Model):
    """An attention encoder-decoder over token ids.

    Source embedding -> `StackedRNN` encoder -> bridge -> `AttentionDecoder`
    over the encoder outputs -> vocabulary logits. Id 0 is padding in both
    vocabularies.

    With the decoder's `attention="none"` it is the plain encoder-decoder:
    the decoder sees the source only through the bridge, and with
    `summary_input=True` also through the encoder's final state (the top
    layer's `h`, both directions side by side) fed to every step.

    Args:
        source_vocab_size, target_vocab_size: int, vocabulary sizes.
        embedding_dim: int, size of both embeddings.
        encoder: dict of `StackedRNN` arguments.
        decoder: dict of `AttentionDecoder` arguments.
        bridge: how the decoder's initial state is made from the encoder's
            final states: `"dense"` (a tanh projection of all of them, for any
            sizes), `"copy"` (layer by layer, bidirectional states
            concatenated; sizes must match) or `"none"` (zeros).
        **kwargs: other keyword arguments of `keras.Model`.

    Call arguments:
        inputs: a tuple `(source_ids, target_input_ids)`, int tensors
            `(batch, Ts)` and `(batch, Tt)`; the target input starts with the
            start token (teacher forcing).
        training: bool.

    Returns:
        Logits `(batch, Tt, target_vocab_size)` carrying the target padding
        mask, so Keras losses and metrics skip padded steps.

    For decoding, `encode(source_ids)` returns the attention cache and the
    initial decoder state; `decode_step(ids, state, cache)` returns the next
    logits, state and attention weights.
    """

    def __init__(
        self,
        source_vocab_size,
        target_vocab_size,
        embedding_dim=64,
        encoder=None,
        decoder=None,
        bridge="dense",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if bridge not in ("dense", "copy", "none"):
            raise ValueError(
                f"Expected one of {{'dense', 'copy', 'none'}}. Received: bridge={bridge!r}"
            )
        self.source_vocab_size = source_vocab_size
        self.target_vocab_size = target_vocab_size
        self.embedding_dim = embedding_dim
        self.encoder = dict(encoder or {"units": 64})
        self.decoder = dict(decoder or {"units": 64})
        self.bridge = bridge
        self.source_embedding = keras.layers.Embedding(
            source_vocab_size, embedding_dim, mask_zero=True, dtype=self.dtype_policy, name="source_embedding"
        )
        self.target_embedding = keras.layers.Embedding(
            target_vocab_size, embedding_dim, mask_zero=True, dtype=self.dtype_policy, name="target_embedding"
        )
        self.encoder_layer = StackedRNN(**self.encoder, dtype=self.dtype_policy, name="encoder")
        self.decoder_layer = AttentionDecoder(**self.decoder, dtype=self.dtype_policy, name="decoder")
        self.bridge_dense = None
        if bridge == "dense":
            self.bridge_dense = keras.layers.Dense(
                self.decoder_layer.flat_state_size,
                activation="tanh",
                dtype=self.dtype_policy,
                name="bridge",
            )
        # Logits in float32 under mixed precision: the loss and the searches need their range.
        self.output_dense = keras.layers.Dense(target_vocab_size, dtype="float32", name="logits")

    @classmethod
    def from_recipe(cls, model_config, source_vocab_size, target_vocab_size, seed=None):
        """Builds the model from a recipe's `Seq2SeqModelConfig`."""
        return cls(
            source_vocab_size,
            target_vocab_size,
            embedding_dim=model_config.embedding_dim,
            encoder=dataclasses.asdict(model_config.encoder),
            decoder=decoder_arguments(model_config.decoder, model_config.attention, seed),
            bridge=model_config.bridge,
        )

    def build(self, input_shape=None):
        self.source_embedding.build((None, None))
        self.target_embedding.build((None, None))
        self.encoder_layer.build((None, None, self.embedding_dim))
        memory_shape = (None, None, self.encoder_layer.output_dim)
        if self.decoder_layer.attention == "none":
            memory_shape = (None, self._summary_dim) if self.decoder_layer.summary_input else None
        self.decoder_layer.build((None, None, self.embedding_dim), memory_shape)
        if self.bridge_dense is not None:
            states = self.encoder_layer.num_layers * self.encoder_layer.states_per_layer
            self.bridge_dense.build((None, states * self.encoder_layer.units))
        self.output_dense.build((None, None, self.decoder_layer.attentional_size))
        self.built = True

    def _initial_decoder_state(self, encoder_states):
        if self.bridge == "none":
            return None
        if self.bridge == "dense":
            flat = ops.concatenate([s for layer in encoder_states for s in layer], axis=-1)
            return self.decoder_layer.unflatten_state(self.bridge_dense(flat))
        if not self.encoder_layer.bidirectional:
            return encoder_states
        half = self.encoder_layer.states_per_layer // 2
        return [
            [ops.concatenate([layer[i], layer[half + i]], axis=-1) for i in range(half)]
            for layer in encoder_states
        ]

    @property
    def _summary_dim(self):
        return self.encoder_layer.units * (2 if self.encoder_layer.bidirectional else 1)

    def _summary(self, encoder_states):
        """The top layer's final `h`, forward and backward side by side: what a plain decoder may read."""
        top = encoder_states[-1]
        per_direction = self.encoder_layer.states_per_layer // (2 if self.encoder_layer.bidirectional else 1)
        return ops.concatenate(top[::per_direction], axis=-1)

    def _encode(self, source_ids, training=None):
        """`(memory, memory_mask, initial_state)`: what the decoder reads (the encoder outputs, or without
        attention the summary or nothing) and its initial state."""
        source_mask = ops.not_equal(source_ids, PAD_ID)
        embedded = self.source_embedding(source_ids)
        memory, states = self.encoder_layer(embedded, mask=source_mask, training=training)
        if self.decoder_layer.attention == "none":
            memory = self._summary(states) if self.decoder_layer.summary_input else None
            source_mask = None
        return memory, source_mask, self._initial_decoder_state(states)

    def call(self, inputs, training=None):
        source_ids, target_ids = inputs
        memory, source_mask, initial_state = self._encode(source_ids, training)
        target = self.target_embedding(target_ids)
        outputs = self.decoder_layer(
            target,
            memory,
            initial_state=initial_state,
            memory_mask=source_mask,
            training=training,
        )
        return self.output_dense(outputs)

    def attention(self, source_ids, target_input_ids):
        """Attention weights `(batch, Tt, Ts)` while reading the given target (inference mode).

        Feeding a decoded output back gives the weights the decoder used while
        producing it. A model without attention raises `ValueError`.
        """
        if self.decoder_layer.attention == "none":
            raise ValueError("This model has no attention (its decoder was built with attention='none').")
        memory, source_mask, initial_state = self._encode(source_ids, training=False)
        _, weights = self.decoder_layer(
            self.target_embedding(target_input_ids),
            memory,
            initial_state=initial_state,
            memory_mask=source_mask,
            return_attention=True,
        )
        return weights

    def encode(self, source_ids):
        """Returns `(cache, state)` for `decode_step`, in inference mode."""
        memory, source_mask, initial_state = self._encode(source_ids, training=False)
        cache = self.decoder_layer.prepare_memory(memory, source_mask)
        state = self.decoder_layer.get_initial_state(ops.shape(source_ids)[0], initial_state)
        return cache, state

    def decode_step(self, ids, state, cache):
        """One decoding step from the previous ids `(batch,)`.

        Returns `(logits, state, weights)`: `(batch, vocab)` logits, the new
        flat state and the attention weights `(batch, Ts)`.
        """
        # A plain lookup: one step has no padding mask to attach (the cells would warn about it).
        embedded = ops.take(self.target_embedding.embeddings, ops.cast(ids, "int32"), axis=0)
        output, state, weights = self.decoder_layer.step(embedded, state, cache)
        return self.output_dense(output), state, weights

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "source_vocab_size": self.source_vocab_size,
                "target_vocab_size": self.target_vocab_size,
                "embedding_dim": self.embedding_dim,
                "encoder": self.encoder,
                "decoder": self.decoder,
                "bridge": self.bridge,
            }
        )
        return config
