"""Direct NumPy computations of the attention formulas, for golden comparisons."""

import numpy as np


def softmax(scores, mask=None):
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    shifted = np.exp(scores - scores.max(-1, keepdims=True))
    return shifted / shifted.sum(-1, keepdims=True)


def bahdanau_scores(query, keys, w_q, w_k, v, g=None, b=None):
    """score[b, i, j] = vᵀ tanh(W_q q_i + W_k k_j (+ bias)), query (B, Tq, dq)."""
    if g is not None:
        v = g * v / np.linalg.norm(v)
    bias = 0.0 if b is None else b
    scores = np.zeros(query.shape[:2] + keys.shape[1:2])
    for batch in range(query.shape[0]):
        for i in range(query.shape[1]):
            for j in range(keys.shape[1]):
                hidden = np.tanh(query[batch, i] @ w_q + keys[batch, j] @ w_k + bias)
                scores[batch, i, j] = v @ hidden
    return scores


def luong_scores(query, keys, score, w=None, w_q=None, w_k=None, v=None, g=None):
    """dot: sᵀh; general: sᵀ(W h); concat: vᵀ tanh(W_q s + W_k h)."""
    scores = np.zeros(query.shape[:2] + keys.shape[1:2])
    for batch in range(query.shape[0]):
        for i in range(query.shape[1]):
            for j in range(keys.shape[1]):
                s, h = query[batch, i], keys[batch, j]
                if score == "dot":
                    scores[batch, i, j] = s @ h
                elif score == "general":
                    scores[batch, i, j] = s @ (h @ w)
                else:
                    scores[batch, i, j] = v @ np.tanh(s @ w_q + h @ w_k)
    return scores if g is None else g * scores


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def lstm_step(x, h, c, kernel, recurrent_kernel, bias):
    """One Keras LSTM step: gates in the order i, f, c̃, o; returns `(h, c)`."""
    z = x @ kernel + h @ recurrent_kernel + bias
    i, f, candidate, o = np.split(z, 4, axis=-1)
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(candidate)
    return sigmoid(o) * np.tanh(c), c


def gru_step(x, h, kernel, recurrent_kernel, bias):
    """One Keras GRU step with `reset_after=True`: gates z, r, h̃; bias `(2, 3u)`."""
    x_z, x_r, x_h = np.split(x @ kernel + bias[0], 3, axis=-1)
    h_z, h_r, h_h = np.split(h @ recurrent_kernel + bias[1], 3, axis=-1)
    z, r = sigmoid(x_z + h_z), sigmoid(x_r + h_r)
    candidate = np.tanh(x_h + r * h_h)
    return z * h + (1.0 - z) * candidate


def _stack_step(x, cells, state):
    """Runs `x` up the stacked cells, updating `state` (per layer) in place; returns the top `h`."""
    for index, (cell_type, kernel, recurrent_kernel, bias) in enumerate(cells):
        if cell_type == "lstm":
            state[index] = list(lstm_step(x, *state[index], kernel, recurrent_kernel, bias))
        else:
            state[index] = [gru_step(x, state[index][0], kernel, recurrent_kernel, bias)]
        x = state[index][0]
    return x


def _attend(query, memory, score_fn, memory_mask):
    """`(weights, context)` of one step's query `(B, d)` over `memory` `(B, Ts, dm)`."""
    mask = None if memory_mask is None else memory_mask[:, None, :]
    weights = softmax(score_fn(query[:, None, :], memory), mask)[:, 0]
    return weights, np.einsum("bs,bsd->bd", weights, memory)


def decoder_reference(inputs, memory, cells, score_fn, w_c, initial_state=None, input_feeding=True, memory_mask=None):
    """Luong's attentional decoder, step by step, in NumPy.

    `cells`: one `(cell_type, kernel, recurrent_kernel, bias)` per layer;
    `score_fn(query (B, 1, d), memory) -> (B, 1, Ts)`; `w_c`: the attentional
    projection, `h̃ = tanh([h; c] @ w_c)`. `initial_state`: per layer, `[h, c]`
    (LSTM) or `[h]` (GRU); zeros when `None`. With input feeding, step `t`
    reads `[x_t; h̃_{t-1}]` with `h̃_{-1} = 0`. Returns `(outputs, weights)`.
    """
    batch, steps = inputs.shape[:2]
    units = cells[0][2].shape[0]
    if initial_state is None:
        initial_state = [[np.zeros((batch, units))] * (2 if cell[0] == "lstm" else 1) for cell in cells]
    state = [list(layer_state) for layer_state in initial_state]
    fed = np.zeros((batch, w_c.shape[1]))
    outputs, all_weights = [], []
    for t in range(steps):
        x = np.concatenate([inputs[:, t], fed], -1) if input_feeding else inputs[:, t]
        x = _stack_step(x, cells, state)
        weights, context = _attend(x, memory, score_fn, memory_mask)
        fed = np.tanh(np.concatenate([x, context], -1) @ w_c)
        outputs.append(fed)
        all_weights.append(weights)
    return np.stack(outputs, 1), np.stack(all_weights, 1)


def published_decoder_reference(inputs, memory, cells, score_fn, output_fn, initial_state, memory_mask=None, gate=None):
    """Bahdanau et al.'s and Xu et al.'s decoder ("attend before"), step by step, in NumPy.

    At step `t`: `c_t = Σ_j softmax(score(s_{t-1}, h_j)) h_j`, times
    `β_t = σ(s_{t-1} w + b)` when `gate=(w, b)`; the first cell reads
    `[x_t; c_t]`; the output is `output_fn(s_t, x_t, c_t)`. `s_{t-1}` is the
    previous top state (`h` of an LSTM). Returns `(outputs, weights)`.
    """
    state = [list(layer_state) for layer_state in initial_state]
    outputs, all_weights = [], []
    for t in range(inputs.shape[1]):
        query = state[-1][0]
        weights, context = _attend(query, memory, score_fn, memory_mask)
        if gate is not None:
            context = sigmoid(query @ gate[0] + gate[1]) * context
        x = np.concatenate([inputs[:, t], context], -1)
        x = _stack_step(x, cells, state)
        outputs.append(output_fn(x, inputs[:, t], context))
        all_weights.append(weights)
    return np.stack(outputs, 1), np.stack(all_weights, 1)


def maxout_deep_output(u_o, v_o, c_o, bias):
    """Bahdanau et al. A.2.2: `t̃ = U_o s + V_o E y + C_o c + b`, then the max of each pair of units.

    The pairs are units `j` and `j + l` (the layer's split of its `2l` units).
    """

    def output_fn(state, embedded, context):
        hidden = state @ u_o + embedded @ v_o + context @ c_o + bias
        size = hidden.shape[-1] // 2
        return np.max(np.stack([hidden[:, :size], hidden[:, size:]]), axis=0)

    return output_fn


def linear_deep_output(l_h, l_z):
    """Xu et al. eq. 7 before `L_o`: `E y_{t-1} + L_h h_t + L_z ẑ_t`."""

    def output_fn(state, embedded, context):
        return embedded + state @ l_h + context @ l_z

    return output_fn


def plain_decoder_reference(inputs, cells, output_fn, initial_state, summary=None, fed_size=None):
    """The encoder-decoder without attention (Sutskever et al.; Cho et al. with `summary`), in NumPy.

    Step `t` reads `x_t`, then `c` (the summary, when given), then with
    input feeding (`fed_size`, the output size) `h̃_{t-1}`, `h̃_{-1} = 0`;
    the output is `h̃_t = output_fn(s_t, x_t, c)` (`c` is `None` without a
    summary). Returns the outputs `(B, Tt, d)`.
    """
    state = [list(layer_state) for layer_state in initial_state]
    fed = None if fed_size is None else np.zeros((inputs.shape[0], fed_size))
    outputs = []
    for t in range(inputs.shape[1]):
        pieces = [inputs[:, t]] + ([] if summary is None else [summary]) + ([] if fed is None else [fed])
        x = _stack_step(np.concatenate(pieces, -1), cells, state)
        output = output_fn(x, inputs[:, t], summary)
        fed = None if fed is None else output
        outputs.append(output)
    return np.stack(outputs, 1)


def decoder_cells(decoder):
    """An `AttentionDecoder`'s stacked cells as `(cell_type, kernel, recurrent_kernel, bias)` NumPy tuples."""
    return [
        (decoder.cell_type, np.array(rnn.cell.kernel), np.array(rnn.cell.recurrent_kernel), np.array(rnn.cell.bias))
        for rnn in decoder.rnn_layers
    ]


def random_initial_state(config, batch, rng):
    """A random per-layer initial state for an `AttentionDecoder` of `config`: `[h, c]` (LSTM) or `[h]` (GRU)."""
    per_layer = 2 if config.get("cell_type", "lstm") == "lstm" else 1
    return [
        [rng.normal(size=(batch, config["units"])).astype("float32") for _ in range(per_layer)]
        for _ in range(config.get("num_layers", 1))
    ]
