import keras
import numpy as np
from keras import ops

from seqtasks.layers._validation import (
    check_choice,
    check_optional_positive_int,
    check_positive_int,
    check_rate,
    clone_initializer,
)
from seqtasks.layers.bahdanau_attention import BahdanauAttention
from seqtasks.layers.luong_attention import SCORES, LuongAttention

DECODER_CELL_TYPES = ("lstm", "gru")
ATTENTION_TYPES = ("bahdanau", "luong", "none")
COMBINE_MODES = ("tanh", "linear", "residual")
PLACEMENTS = ("after", "before")
DEEP_OUTPUTS = (None, "maxout", "linear")


@keras.saving.register_keras_serializable(package="seqtasks")
class AttentionDecoder(keras.layers.Layer):
    """A stacked recurrent decoder with attention, in Luong's or Bahdanau's placement.

    With `placement="after"` (Luong et al.), at every target step `t` the decoder

    1. reads `x_t`, the target embedding, concatenated with the previous
       attentional vector `h̃_{t-1}` when `input_feeding=True`;
    2. runs it through `num_layers` stacked LSTM or GRU cells, giving the top
       state `h_t`;
    3. attends over the memory (the encoder outputs) with `h_t` as the query,
       giving the context `c_t` (Bahdanau or Luong score);
    3b. with `gate=True`, scales the context by `β_t = σ(w·h_t + b)`, the
       gating scalar of Show, Attend and Tell, so the decoder can lean on
       its language state rather than the memory (e.g. for "a" or "of");
    4. returns the attentional vector `h̃_t = tanh(W_c [h_t; c_t])`, or with
       `combine="residual"` `h̃_t = LayerNorm(h_t + W_c c_t)` (the cross
       attention block of TensorFlow's current NMT tutorial), or with
       `combine="linear"` `h̃_t = W_c [h_t; c_t]` (what tfa.seq2seq's
       `AttentionWrapper(attention_layer_size=...)` computes), dropout applied
       when training; the caller projects it onto the vocabulary.

    With `placement="before"` (Bahdanau et al.; Xu et al.), the decoder
    attends first, with the *previous* top state `s_{t-1}` as the query, and
    feeds the context into the recurrent cells:

    1. `c_t = attend(s_{t-1}, memory)`, gated by `β_t = σ(w·s_{t-1} + b)`
       with `gate=True` (the gate of Show, Attend and Tell, from `h_{t-1}`);
    2. the first layer reads `[x_t; c_t]`; the stack gives `s_t`;
    3. the output is made from `s_t` and `c_t` as above, or by a deep output.

    `deep_output` replaces step 4 by the papers' output layers, which also
    read the previous word `x_t` (= `E y_{t-1}`):

    - `"maxout"` (Bahdanau et al., appendix A.2.2):
      `t̃ = U_o s_t + V_o x_t + C_o c_t + b`, of size `2 * output_size`, and
      `t = max(t̃_j, t̃_{j + output_size})`, a maxout over pairs of units.
      (The paper's main text, eq. 4, reads `s_t`, as here; its appendix
      writes `s_{t-1}`.)
    - `"linear"` (Xu et al., eq. 7): `t = x_t + L_h s_t + L_z c_t`, so
      `output_size` is the embedding size (it defaults to it). The caller's
      vocabulary projection is the paper's `L_o`.

    With `attention="none"` the decoder does not attend: it is the plain
    encoder-decoder the attention papers compare against (Sutskever et al.;
    Cho et al.). The output is made from `h_t` alone (`tanh(W_c h_t)`, or
    `LayerNorm(h_t)` with `combine="residual"`), and `memory` is not read,
    except with `summary_input=True`: then `memory` is a summary of the
    source, `(batch, memory_dim)` (such as the encoder's final state), that
    enters every step as a fixed context, concatenated to the cell input and
    read by the output like `c_t` (Cho et al. 2014, eqs. for `h_t` and `y_t`).

    `call` runs a whole target sequence at once (teacher forcing). With input
    feeding or `placement="before"` the steps depend on each other through
    the attention and run in a `keras.ops.scan`; otherwise (Luong's placement
    without input feeding) the recurrent layers run over the whole sequence in their fused
    (cuDNN-eligible) kernels and attention is computed for all steps at once.
    For decoding, `get_initial_state`, `prepare_memory` and `step` run one
    step at a time from an explicit state; both paths compute the same
    function.

    Args:
        units: int, the state size of every recurrent layer.
        num_layers: int, how many recurrent layers to stack. Defaults to 1.
        cell_type: `"lstm"` or `"gru"`.
        attention: `"bahdanau"`, `"luong"` or `"none"` (no attention).
        score: the Luong score, one of `"dot"`, `"general"`, `"concat"`
            (ignored for Bahdanau). `"dot"` needs memory of size `units`.
        attention_units: hidden size of the Bahdanau and Luong `concat`
            scores. Defaults to `units`.
        normalize: bool, weight normalisation of the Bahdanau score.
        scale: bool, learned scale of the Luong score.
        input_feeding: bool, whether `h̃_{t-1}` is fed into step `t`.
            Defaults to `True` with `placement="after"`; `"before"` feeds the
            context itself and takes none.
        output_size: int, size of the attentional vector `h̃` (the output).
            Defaults to `units`, or with `deep_output="linear"` to the size
            of `inputs`; `combine="residual"` needs it to be `units`.
        combine: how the top state and the context make `h̃`: `"tanh"`
            (Luong et al.), `"linear"` (the same projection without the tanh,
            as tfa.seq2seq's `AttentionWrapper` and OpenNMT-tf's V1 models
            have it) or `"residual"` (a residual connection around the
            projected context, then layer normalisation).
        gate: bool, whether the context is scaled by a learned gating scalar
            computed from the query state (Xu et al. 2015, section 4.2.1).
        placement: `"after"`: attend with the new top state `h_t` (Luong);
            `"before"`: attend with the previous one `s_{t-1}` and feed the
            context into the first cell (Bahdanau; Show, Attend and Tell).
        deep_output: `None` (the `combine` above), `"maxout"` or `"linear"`,
            the papers' output layers that also read the previous word.
        summary_input: bool, with `attention="none"` only: `memory` is a
            summary vector `(batch, memory_dim)` fed to every step.
        dropout: float, dropout rate between recurrent layers and on `h̃`.
        seed: optional int, seed of the dropout masks.
        kernel_initializer: initializer of every kernel: the recurrent
            layers' input kernels, the attention's projections (and `v`),
            the gate and the attentional projection `W_c`. Defaults to
            `"glorot_uniform"`.
        recurrent_initializer: initializer of the recurrent layers'
            recurrent kernels. Defaults to `"orthogonal"`.
        bias_initializer: initializer of the recurrent layers' and the
            gate's biases. Defaults to `"zeros"` (the LSTM forget gate bias
            still starts at 1). Every sublayer gets its own copy of these
            initializers, so unseeded ones start them from different values.
        **kwargs: other keyword arguments of `keras.layers.Layer`.

    Call arguments:
        inputs: `(batch, Tt, features)`, the embedded target inputs (the
            target shifted right, starting with a start token).
        memory: `(batch, Ts, memory_dim)`, the encoder outputs; with
            `attention="none"`, the summary `(batch, memory_dim)` when
            `summary_input=True`, else unused (`None`).
        initial_state: optional list with one entry per layer, each a list of
            `(batch, units)` tensors (`[h, c]` for LSTM, `[h]` for GRU), such
            as the `states` returned by a unidirectional `StackedRNN` of the
            same size. Zeros when not given.
        inputs_mask: optional `(batch, Tt)` boolean; outputs at padded target
            steps are zero (the recurrence runs through them, as in `step`).
            Taken from the Keras mask of `inputs`.
        memory_mask: optional `(batch, Ts)` boolean; padded source positions
            get zero attention. Taken from the Keras mask of `memory`.
        training: bool, whether dropout is active.
        return_attention: bool, whether to also return the attention weights
            (an error with `attention="none"`, which has none).

    Returns:
        `outputs` of shape `(batch, Tt, output_size)`, carrying the target
        mask; with `return_attention=True` a tuple `(outputs, weights)` where
        `weights` is `(batch, Tt, Ts)`. Both are in the layer's compute dtype
        (the attention scores and softmax run in float32).

    Step-by-step decoding:

    >>> decoder = AttentionDecoder(units=16, attention="luong", score="general")
    >>> memory = np.ones((2, 7, 12), "float32")
    >>> _ = decoder(np.zeros((2, 1, 8), "float32"), memory)  # builds the layer
    >>> cache = decoder.prepare_memory(memory)
    >>> state = decoder.get_initial_state(batch_size=2)
    >>> output, state, weights = decoder.step(np.zeros((2, 8), "float32"), state, cache)
    >>> tuple(output.shape), tuple(weights.shape)
    ((2, 16), (2, 7))

    References:
        Luong, Pham & Manning, "Effective Approaches to Attention-based Neural
        Machine Translation", EMNLP 2015 (input feeding, attentional vector).
        Bahdanau, Cho & Bengio, "Neural Machine Translation by Jointly
        Learning to Align and Translate", ICLR 2015 (additive attention,
        the `"before"` placement, the maxout deep output).
        Xu et al., "Show, Attend and Tell", ICML 2015 (gating scalar, the
        `"linear"` deep output).
        Cho et al., "Learning Phrase Representations using RNN
        Encoder-Decoder for Statistical Machine Translation", EMNLP 2014
        (the summary fed to every step, `summary_input`).
    """

    def __init__(
        self,
        units,
        num_layers=1,
        cell_type="lstm",
        attention="luong",
        score="general",
        attention_units=None,
        normalize=False,
        scale=False,
        input_feeding=None,
        output_size=None,
        gate=False,
        dropout=0.0,
        seed=None,
        combine="tanh",
        placement="after",
        deep_output=None,
        summary_input=False,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int(units, "units")
        check_positive_int(num_layers, "num_layers")
        check_choice(cell_type, DECODER_CELL_TYPES, "cell_type")
        check_choice(attention, ATTENTION_TYPES, "attention")
        check_choice(score, SCORES, "score")
        check_optional_positive_int(attention_units, "attention_units")
        check_optional_positive_int(output_size, "output_size")
        check_rate(dropout, "dropout")
        check_choice(combine, COMBINE_MODES, "combine")
        check_choice(placement, PLACEMENTS, "placement")
        check_choice(deep_output, DEEP_OUTPUTS, "deep_output")
        if combine == "residual" and output_size not in (None, units):
            raise ValueError(
                f"combine='residual' adds the context to the state, so output_size must be units ({units}). "
                f"Received: output_size={output_size}"
            )
        if combine != "tanh" and deep_output is not None:
            raise ValueError(
                f"deep_output={deep_output!r} replaces the combination of state and context. "
                f"Received: combine={combine!r}"
            )
        if attention == "none":
            if gate:
                raise ValueError("gate=True scales an attention context; attention='none' has none. Received: gate=True")
            if placement != "after":
                raise ValueError(
                    "placement says where attention sits in a step; attention='none' has none (summary_input "
                    f"feeds a fixed context instead). Received: placement={placement!r}"
                )
        elif summary_input:
            raise ValueError(
                f"summary_input feeds a fixed summary instead of an attention context, so it needs "
                f"attention='none'. Received: attention={attention!r}"
            )
        if input_feeding is None:
            input_feeding = placement == "after"
        if input_feeding and placement == "before":
            raise ValueError(
                "placement='before' feeds the context into the cells at every step, so it takes no "
                "input feeding. Received: input_feeding=True"
            )
        self.units = units
        self.num_layers = num_layers
        self.cell_type = cell_type
        self.attention = attention
        self.score = score
        self.attention_units = attention_units
        self.normalize = bool(normalize)
        self.scale = bool(scale)
        self.input_feeding = bool(input_feeding)
        self.output_size = output_size
        self.gate = bool(gate)
        self.dropout = float(dropout)
        self.seed = seed
        self.combine = combine
        self.placement = placement
        self.deep_output = deep_output
        self.summary_input = bool(summary_input)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.recurrent_initializer = keras.initializers.get(recurrent_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.supports_masking = True

    @property
    def attentional_size(self):
        """Size of the outputs. With `deep_output="linear"` and no `output_size`, known once built."""
        if self.output_size:
            return self.output_size
        return getattr(self, "_inputs_dim", self.units) if self.deep_output == "linear" else self.units

    @property
    def _states_per_layer(self):
        return 2 if self.cell_type == "lstm" else 1

    def build(self, inputs_shape, memory_shape=None, initial_state_shape=None):
        rnn_class = keras.layers.LSTM if self.cell_type == "lstm" else keras.layers.GRU
        self._inputs_dim = input_dim = inputs_shape[-1]
        has_context = self.attention != "none" or self.summary_input
        if has_context and memory_shape is None:
            raise ValueError(
                "Expected memory: the encoder outputs, or with attention='none' and summary_input=True, the "
                "summary. Received: memory=None"
            )
        # The width of what the output reads beside the state: the context, or the summary, or nothing.
        memory_dim = memory_shape[-1] if has_context else 0
        if self.deep_output == "linear" and self.attentional_size != input_dim:
            raise ValueError(
                f"deep_output='linear' adds the input embedding (size {input_dim}) to the output, so "
                f"output_size must be {input_dim}. Received: output_size={self.output_size}"
            )
        if self.input_feeding:
            input_dim += self.attentional_size
        if self.placement == "before" or self.summary_input:
            input_dim += memory_dim
        self.rnn_layers = []
        for index in range(self.num_layers):
            layer = rnn_class(
                self.units,
                return_sequences=True,
                return_state=True,
                kernel_initializer=clone_initializer(self.kernel_initializer),
                recurrent_initializer=clone_initializer(self.recurrent_initializer),
                bias_initializer=clone_initializer(self.bias_initializer),
                dtype=self.dtype_policy,
                name=f"{self.cell_type}_{index}",
            )
            layer.build((None, None, input_dim))
            self.rnn_layers.append(layer)
            input_dim = self.units
        attention_units = self.attention_units or self.units
        self.attention_layer = None
        if self.attention == "bahdanau":
            self.attention_layer = BahdanauAttention(
                attention_units,
                normalize=self.normalize,
                kernel_initializer=clone_initializer(self.kernel_initializer),
                dtype=self.dtype_policy,
                name="attention",
            )
        elif self.attention == "luong":
            self.attention_layer = LuongAttention(
                score=self.score,
                units=attention_units if self.score == "concat" else None,
                scale=self.scale,
                kernel_initializer=clone_initializer(self.kernel_initializer),
                dtype=self.dtype_policy,
                name="attention",
            )
        if self.attention_layer is not None:
            self.attention_layer.build((None, self.units), memory_shape)
        self.gate_dense = None
        if self.gate:
            self.gate_dense = keras.layers.Dense(
                1,
                activation="sigmoid",
                kernel_initializer=clone_initializer(self.kernel_initializer),
                bias_initializer=clone_initializer(self.bias_initializer),
                dtype=self.dtype_policy,
                name="context_gate",
            )
            self.gate_dense.build((None, self.units))
        self.output_dense = self.output_norm = None
        self.deep_state_dense = self.deep_context_dense = None
        if self.deep_output == "maxout":
            self.output_dense = self._output_projection(
                2 * self.attentional_size, self.units + self._inputs_dim + memory_dim, "deep_output", bias=True
            )
        elif self.deep_output == "linear":
            self.deep_state_dense = self._output_projection(self.attentional_size, self.units, "deep_state")
            if memory_dim:
                self.deep_context_dense = self._output_projection(self.attentional_size, memory_dim, "deep_context")
        elif self.combine == "residual":
            if memory_dim:
                self.output_dense = self._output_projection(self.attentional_size, memory_dim, "attentional_dense")
            self.output_norm = keras.layers.LayerNormalization(dtype=self.dtype_policy, name="attentional_norm")
            self.output_norm.build((None, self.units))
        else:
            self.output_dense = self._output_projection(
                self.attentional_size,
                self.units + memory_dim,
                "attentional_dense",
                activation="tanh" if self.combine == "tanh" else None,
            )
        self.built = True

    def _output_projection(self, size, input_dim, name, activation=None, bias=False):
        layer = keras.layers.Dense(
            size,
            activation=activation,
            use_bias=bias,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name=name,
        )
        layer.build((None, input_dim))
        return layer

    def _attentional(self, state, context, inputs):
        """The output from the top state, the context (`None` without one) and the input embedding."""
        with_context = [] if context is None else [context]
        if self.deep_output == "maxout":
            hidden = self.output_dense(ops.concatenate([state, inputs, *with_context], axis=-1))
            size = self.attentional_size
            return ops.maximum(hidden[..., :size], hidden[..., size:])
        if self.deep_output == "linear":
            output = inputs + self.deep_state_dense(state)
            return output if context is None else output + self.deep_context_dense(context)
        if self.output_norm is None:
            return self.output_dense(ops.concatenate([state, *with_context], axis=-1))
        return self.output_norm(state if context is None else state + self.output_dense(context))

    def _require_built(self):
        if not self.built:
            raise ValueError(
                "AttentionDecoder is not built: call it once on a target "
                "batch and the memory (or call `build`) before stepping."
            )

    def prepare_memory(self, memory, memory_mask=None):
        """Returns the per-sequence attention cache `(memory, keys, mask)`.

        The key projection is computed here once, not at every step. The mask
        is all `True` when not given, so the cache is a tuple of tensors that
        beam search can tile. With `attention="none"` the cache is
        `(summary,)` with `summary_input=True`, else empty.
        """
        self._require_built()
        if self.attention == "none":
            return (memory,) if self.summary_input else ()
        if memory_mask is None:
            memory_mask = ops.ones(ops.shape(memory)[:2], dtype="bool")
        keys = self.attention_layer.prepare_keys(memory)
        return memory, keys, ops.cast(memory_mask, "bool")

    def get_initial_state(self, batch_size, initial_state=None):
        """Returns the flat decoder state: each layer's states, then `h̃`.

        `initial_state` takes the per-layer format of `call`. The attentional
        vector fed into the first step is zero.
        """
        self._require_built()
        state = []
        if initial_state is None:
            zeros = ops.zeros((batch_size, self.units), dtype=self.compute_dtype)
            state = [zeros] * (self.num_layers * self._states_per_layer)
        else:
            if len(initial_state) != self.num_layers:
                raise ValueError(
                    f"Expected an initial state for each of the {self.num_layers} "
                    f"layers. Received: {len(initial_state)} entries"
                )
            for layer_state in initial_state:
                layer_state = list(layer_state)
                if len(layer_state) != self._states_per_layer:
                    raise ValueError(
                        f"Expected {self._states_per_layer} state tensors per "
                        f"{self.cell_type} layer. Received: {len(layer_state)}"
                    )
                state.extend(layer_state)
        if self.input_feeding:
            state.append(
                ops.zeros((batch_size, self.attentional_size), dtype=self.compute_dtype)
            )
        return state

    @property
    def flat_state_size(self):
        """Size of all layers' recurrent states side by side (`unflatten_state`'s input)."""
        return self.units * self._states_per_layer * self.num_layers

    def unflatten_state(self, vector):
        """`(batch, flat_state_size)` -> the per-layer `initial_state` format of `call`."""
        n, units = self._states_per_layer, self.units
        pieces = [vector[:, i * units : (i + 1) * units] for i in range(n * self.num_layers)]
        return [pieces[i * n : (i + 1) * n] for i in range(self.num_layers)]

    def _layer_states(self, state):
        n = self._states_per_layer
        return [list(state[i * n : (i + 1) * n]) for i in range(self.num_layers)]

    def step(self, inputs, state, memory_cache, training=False):
        """Runs one decoder step.

        Args:
            inputs: `(batch, features)`, the embedded previous target token.
            state: the flat state from `get_initial_state` or the last step.
            memory_cache: the tuple from `prepare_memory`.
            training: bool, whether dropout is active: as in `call`, between
                the recurrent layers and on the attentional vector (the one
                returned and, with input feeding, fed to the next step), with
                masks drawn afresh at every step.

        Returns:
            `(output, state, weights)`: the attentional vector
            `(batch, output_size)`, the new flat state and the attention
            weights `(batch, Ts)` (`None` with `attention="none"`).
        """
        self._require_built()
        masks = self._dropout_masks(1, ops.shape(inputs)[0], training)
        if masks is not None:
            masks = tuple(mask[0] for mask in masks)
        return self._step(inputs, state, memory_cache, masks)

    def _step(self, inputs, state, memory_cache, dropout_masks, kernels=None):
        layer_states = self._layer_states(state)
        x = inputs
        context = weights = None
        if self.attention == "none":
            if self.summary_input:
                (context,) = memory_cache
                x = ops.concatenate([x, context], axis=-1)
        else:
            memory, keys, memory_mask = memory_cache
        if self.placement == "before":
            # The query is the previous top state, h before c for an LSTM.
            context, weights = self._attend(layer_states[-1][0], keys, memory, memory_mask)
            x = ops.concatenate([x, context], axis=-1)
        if self.input_feeding:
            x = ops.concatenate([x, state[-1]], axis=-1)
        new_state = []
        for index, layer_state in enumerate(layer_states):
            if index > 0 and dropout_masks is not None:
                x = x * dropout_masks[index - 1]
            if kernels is None:
                x, layer_new_state = self.rnn_layers[index].cell(x, layer_state)
            else:
                x, layer_new_state = self._lstm_cell(self.rnn_layers[index].cell, x, layer_state, kernels[index])
            if not isinstance(layer_new_state, (list, tuple)):
                layer_new_state = [layer_new_state]
            new_state.extend(layer_new_state)
        if self.placement == "after" and self.attention != "none":
            context, weights = self._attend(x, keys, memory, memory_mask)
        output = self._attentional(x, context, inputs)
        if dropout_masks is not None:
            output = output * dropout_masks[-1]
        if self.input_feeding:
            new_state.append(output)
        return output, new_state, weights

    def _transposed_kernels(self):
        """Each LSTM layer's kernels and their transposes, for `_lstm_cell`; `None` where the cells run as they are.

        Under TensorFlow a scan's gradient multiplies by every kernel transposed at
        every step, and oneDNN's product with a transposed operand is slower than a
        plain one (`python -m benchmarks.lstm_products`); read transposed once,
        before the scan, they are plain products.
        """
        if self.cell_type != "lstm" or keras.backend.backend() != "tensorflow":
            return None
        kernels = []
        for layer in self.rnn_layers:
            kernel = ops.cast(layer.cell.kernel, self.compute_dtype)
            recurrent = ops.cast(layer.cell.recurrent_kernel, self.compute_dtype)
            kernels.append((kernel, ops.transpose(kernel), recurrent, ops.transpose(recurrent)))
        return kernels

    def _lstm_cell(self, cell, inputs, state, kernels):
        """`cell(inputs, state)` of a Keras `LSTMCell` (its fused form), its products through `_product`."""
        kernel, kernel_t, recurrent, recurrent_t = kernels
        h, c = state
        z = _product(inputs, kernel, kernel_t) + _product(h, recurrent, recurrent_t)
        z = z + ops.cast(cell.bias, z.dtype)
        z_i, z_f, z_c, z_o = ops.split(z, 4, axis=1)
        c = cell.recurrent_activation(z_f) * c + cell.recurrent_activation(z_i) * cell.activation(z_c)
        h = cell.recurrent_activation(z_o) * cell.activation(c)
        return h, [h, c]

    def _attend(self, query, keys, memory, memory_mask):
        context, weights = self.attention_layer.attend(query, keys, memory, memory_mask)
        if self.gate_dense is not None:
            context = context * self.gate_dense(query)
        return context, weights

    def _dropout_masks(self, time_steps, batch_size, training):
        """Per-step dropout masks drawn before the scan, one per dropout site."""
        if not training or self.dropout == 0.0:
            return None
        sizes = [self.units] * (self.num_layers - 1) + [self.attentional_size]
        return tuple(
            keras.random.dropout(
                ops.ones((time_steps, batch_size, size), dtype=self.compute_dtype),
                self.dropout,
                seed=self.seed_generator,
            )
            for size in sizes
        )

    def call(
        self,
        inputs,
        memory=None,
        initial_state=None,
        inputs_mask=None,
        memory_mask=None,
        training=None,
        return_attention=False,
    ):
        self._check_return_attention(return_attention)
        batch_size = ops.shape(inputs)[0]
        cache = self.prepare_memory(memory, memory_mask)
        state = self.get_initial_state(batch_size, initial_state)
        if self.input_feeding or self.placement == "before":
            outputs, weights = self._run_scan(inputs, state, cache, training)
        else:
            outputs, weights = self._run_fused(inputs, state, cache, training)
        if inputs_mask is not None:
            outputs = outputs * ops.expand_dims(ops.cast(inputs_mask, outputs.dtype), -1)
        if return_attention:
            return outputs, weights
        return outputs

    def _check_return_attention(self, return_attention):
        if return_attention and self.attention == "none":
            raise ValueError(
                "This decoder has no attention weights to return: it was built with attention='none'. "
                "Received: return_attention=True"
            )

    def _run_scan(self, inputs, state, cache, training):
        time_major = ops.transpose(inputs, (1, 0, 2))
        batch_size = ops.shape(inputs)[0]
        masks = self._dropout_masks(ops.shape(time_major)[0], batch_size, training)
        attends = self.attention != "none"

        input_dim = inputs.shape[-1]
        mask_sizes = [] if masks is None else [mask.shape[-1] for mask in masks]

        # Keras' TensorFlow `scan` stacks outputs shaped like the carry, so the
        # step's output and weights travel in the carry and the carry is the
        # per-step output. Its inputs are one tensor (the dropout masks
        # concatenated to the embeddings): with several, it fails on an unknown
        # number of steps.
        def body(carry, step_inputs):
            step_masks = None
            if mask_sizes:
                pieces = ops.split(step_inputs, np.cumsum([input_dim] + mask_sizes[:-1]).tolist(), axis=-1)
                step_inputs, step_masks = pieces[0], pieces[1:]
            output, new_state, weights = self._step(step_inputs, carry[0], cache, step_masks, kernels)
            new_carry = (new_state, output)
            if attends:
                new_carry += (ops.cast(weights, self.compute_dtype),)
            return new_carry, new_carry

        kernels = self._transposed_kernels()
        init = (state, ops.zeros((batch_size, self.attentional_size), dtype=self.compute_dtype))
        if attends:
            init += (ops.zeros_like(ops.cast(cache[2], self.compute_dtype)),)
        xs = time_major if masks is None else ops.concatenate([time_major, *masks], axis=-1)
        _, (_, outputs, *weights) = ops.scan(body, init, xs)
        weights = ops.transpose(weights[0], (1, 0, 2)) if attends else None
        return ops.transpose(outputs, (1, 0, 2)), weights

    def _run_fused(self, inputs, state, cache, training):
        x = inputs
        summary = None
        if self.summary_input:
            (summary,) = cache
            summary = ops.broadcast_to(
                ops.expand_dims(summary, 1), (ops.shape(inputs)[0], ops.shape(inputs)[1], ops.shape(summary)[-1])
            )
            x = ops.concatenate([x, summary], axis=-1)
        for index, layer_state in enumerate(self._layer_states(state)):
            if index > 0 and training and self.dropout > 0.0:
                x = keras.random.dropout(x, self.dropout, seed=self.seed_generator)
            # No mask: padded steps run on like the scan's and `step`'s, and `call` zeroes their outputs.
            x, *_ = self.rnn_layers[index](x, initial_state=layer_state, training=training)
        if self.attention == "none":
            context = summary
        else:
            memory, keys, memory_mask = cache
            context, weights = self._attend(x, keys, memory, memory_mask)
        outputs = self._attentional(x, context, inputs)
        if training and self.dropout > 0.0:
            outputs = keras.random.dropout(outputs, self.dropout, seed=self.seed_generator)
        if self.attention == "none":
            return outputs, None
        # The scan path's weights are in the compute dtype; these take the memory's.
        return outputs, ops.cast(weights, self.compute_dtype)

    def compute_output_spec(
        self,
        inputs,
        memory=None,
        initial_state=None,
        inputs_mask=None,
        memory_mask=None,
        training=None,
        return_attention=False,
    ):
        self._check_return_attention(return_attention)
        batch_size, target_steps = inputs.shape[0], inputs.shape[1]
        outputs = keras.KerasTensor(
            (batch_size, target_steps, self.attentional_size), dtype=self.compute_dtype
        )
        if not return_attention:
            return outputs
        weights = keras.KerasTensor(
            (batch_size, target_steps, memory.shape[1]), dtype=self.compute_dtype
        )
        return outputs, weights

    def compute_mask(self, inputs, previous_mask=None):
        return previous_mask

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "num_layers": self.num_layers,
                "cell_type": self.cell_type,
                "attention": self.attention,
                "score": self.score,
                "attention_units": self.attention_units,
                "normalize": self.normalize,
                "scale": self.scale,
                "input_feeding": self.input_feeding,
                "output_size": self.output_size,
                "gate": self.gate,
                "dropout": self.dropout,
                "seed": self.seed,
                "combine": self.combine,
                "placement": self.placement,
                "deep_output": self.deep_output,
                "summary_input": self.summary_input,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "recurrent_initializer": keras.initializers.serialize(
                    self.recurrent_initializer
                ),
                "bias_initializer": keras.initializers.serialize(
                    self.bias_initializer
                ),
            }
        )
        return config


@ops.custom_gradient
def _product(x, kernel, kernel_t):
    """`x @ kernel`, whose gradient for `x` is `upstream @ kernel_t` (`kernel` transposed beforehand).

    `kernel_t` gets no gradient of its own (`None`, not a zero tensor the size
    of the kernel at every step): the kernel's comes through `kernel`.
    """

    def gradient(*args, upstream=None):
        if upstream is None:
            (upstream,) = args
        return ops.matmul(upstream, kernel_t), ops.matmul(ops.transpose(x), upstream), None

    return ops.matmul(x, kernel), gradient
