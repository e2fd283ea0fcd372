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
