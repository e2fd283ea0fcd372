"""Recurrent cells in a checkpoint: an LSTM or GRU cell's kernel, recurrent kernel and bias."""

from dataclasses import dataclass

import numpy as np

from seqtasks.errors import SeqtasksError


@dataclass
class Cell:
    cell_type: str
    units: int
    input_dim: int
    kernel: np.ndarray
    recurrent_kernel: np.ndarray
    bias: np.ndarray


def read_cell(variables, prefix, what):
    """The Keras LSTM or GRU cell (tf.keras 2 layout, gates i f c o / z r h) whose variables start with `prefix/`."""
    recurrent = variables.take(f"{prefix}/recurrent_kernel", f"the {what}'s recurrent kernel")
    units = recurrent.shape[0]
    gates = recurrent.shape[1] // units if recurrent.ndim == 2 and units else 0
    if gates not in (3, 4) or recurrent.shape[1] != gates * units:
        raise SeqtasksError(
            f"{variables.path}: {prefix}/recurrent_kernel has shape {recurrent.shape}; expected an LSTM's "
            f"(units, 4 * units) or a GRU's (units, 3 * units)"
        )
    kernel = variables.take(f"{prefix}/kernel", f"the {what}'s kernel")
    if kernel.ndim != 2 or kernel.shape[1] != gates * units:
        raise SeqtasksError(
            f"{variables.path}: {prefix}/kernel has shape {kernel.shape}; expected (inputs, {gates * units})"
        )
    cell_type = "lstm" if gates == 4 else "gru"
    # A GRU with reset_after (Keras' default since TensorFlow 2) has an input and a recurrent bias.
    bias_shape = (4 * units,) if cell_type == "lstm" else (2, 3 * units)
    bias = variables.take(f"{prefix}/bias", f"the {what}'s bias", bias_shape)
    return Cell(cell_type, units, kernel.shape[0], kernel, recurrent, bias)


def copy_cell(cell, keras_cell):
    keras_cell.kernel.assign(cell.kernel)
    keras_cell.recurrent_kernel.assign(cell.recurrent_kernel)
    keras_cell.bias.assign(cell.bias)


def check_stack(variables, cells, prefixes, input_dim, what):
    """Each cell of a stack reads the one below it (the first reads `input_dim`); all have the same size."""
    for cell, prefix in zip(cells, prefixes):
        if (cell.input_dim, cell.units, cell.cell_type) != (input_dim, cells[0].units, cells[0].cell_type):
            raise SeqtasksError(
                f"{variables.path}: the {what} cell {prefix} is a {cell.cell_type} of {cell.units} reading "
                f"{cell.input_dim} features; expected a {cells[0].cell_type} of {cells[0].units} reading {input_dim}"
            )
        input_dim = cell.units


def check_embedding(variables, matrix, vocabulary, role, embedding_dim):
    if matrix.shape != (vocabulary.old_size, embedding_dim):
        raise SeqtasksError(
            f"{variables.path}: the {role} embedding has shape {matrix.shape}; expected one row per id of the {role} "
            f"vocabulary and the source embedding's width: ({vocabulary.old_size}, {embedding_dim})"
        )
