"""The recipe's typed sections that every task shares, and the fields' makers the tasks' own sections
(`seqtasks/tasks/<name>/config.py`) use.

Field metadata carries the bounds the loader enforces: `min`, `max`, and
`below` (an exclusive upper bound); those of a list hold for each entry.
Every integer has an upper bound. A section's `check()` returns the
cross-field problems as `(relative dotted path, message)` pairs. Every field's
`doc` metadata is its documentation.
"""

import os
from dataclasses import dataclass, field, make_dataclass
from typing import Any, Literal, Optional

from seqtasks.decoding import settings as decoding_settings
from seqtasks.utils.bounds import MAX_SEED, MAX_VOCAB

# Upper bounds of the integer fields, far above what a recipe needs: a slip (three
# zeros too many) is an error when the recipe is loaded, not a crash mid-run.
MAX_SIZE = 65_536  # embeddings, units, filters
MAX_LAYERS = 64
MAX_LENGTH = 10_000  # tokens or subwords of a sequence
MAX_EXAMPLES = 10_000_000
MAX_BATCH = 1_048_576
MAX_EPOCHS = 100_000
MAX_COLUMN = 1_000
MAX_ENSEMBLE = 16  # models trained side by side in one run


def spec(default, doc, **bounds):
    """A dataclass field with a documentation string and optional bounds."""
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"doc": doc, **bounds})
    return field(default=default, metadata={"doc": doc, **bounds})


def section(cls, doc):
    return field(default_factory=cls, metadata={"doc": doc})


@dataclass
class EncoderConfig:
    cell_type: Literal["lstm", "gru", "rnn"] = spec("lstm", "Recurrent cell of every encoder layer.")
    units: int = spec(128, "State size of every encoder layer.", min=1, max=MAX_SIZE)
    num_layers: int = spec(1, "Number of stacked encoder layers.", min=1, max=MAX_LAYERS)
    bidirectional: bool = spec(False, "Whether every layer reads both directions.")
    merge_mode: Literal["concat", "sum", "ave", "mul"] = spec(
        "concat", "How bidirectional outputs are merged."
    )
    residual: bool = spec(False, "Residual connections between layers of equal size.")
    dropout: float = spec(0.0, "Dropout between encoder layers.", min=0.0, below=1.0)

    @property
    def output_dim(self):
        if self.bidirectional and self.merge_mode == "concat":
            return 2 * self.units
        return self.units


@dataclass
class AttentionConfig:
    type: Literal["bahdanau", "luong", "none"] = spec(
        "luong",
        "Attention mechanism; 'none': the plain encoder-decoder, which sees the source only through the bridge "
        "(and decoder.summary_input), the baseline attention is measured against.",
    )
    score: Literal["dot", "general", "concat"] = spec(
        "general", "Luong score function (ignored for Bahdanau)."
    )
    units: Optional[int] = spec(
        None, "Hidden size of the Bahdanau and Luong concat scores (default: decoder units).", min=1, max=MAX_SIZE
    )
    normalize: bool = spec(False, "Weight-normalised Bahdanau score.")
    scale: bool = spec(
        False, "Learned scale of the Luong score, starting at 1/sqrt(size) for dot and general."
    )


@dataclass
class DecoderConfig:
    cell_type: Literal["lstm", "gru"] = spec("lstm", "Recurrent cell of every decoder layer.")
    units: int = spec(128, "State size of every decoder layer.", min=1, max=MAX_SIZE)
    num_layers: int = spec(1, "Number of stacked decoder layers.", min=1, max=MAX_LAYERS)
    input_feeding: Optional[bool] = spec(
        None,
        "Feed the previous attentional vector into each step (Luong); null: true with placement 'after', "
        "false with 'before' (which feeds the context instead).",
    )
    dropout: float = spec(0.0, "Dropout between decoder layers and on the attentional vector.", min=0.0, below=1.0)
    combine: Literal["tanh", "linear", "residual"] = spec(
        "tanh",
        "How the decoder state h and the attention context c make the attentional vector: 'tanh', "
        "tanh(W[h; c]) (Luong); 'linear', W[h; c] (tfa.seq2seq's AttentionWrapper, OpenNMT-tf's V1 models); "
        "'residual', LayerNorm(h + Wc) (TensorFlow's current NMT tutorial).",
    )
    placement: Literal["after", "before"] = spec(
        "after",
        "Where attention sits in a step: 'after', the new state h_t is the query (Luong); 'before', the "
        "previous state s_{t-1} is the query and the context enters the cell with the previous word "
        "(Bahdanau et al.; Show, Attend and Tell).",
    )
    output_size: Optional[int] = spec(
        None,
        "Size of the decoder's output, the vector projected onto the vocabulary (null: units; with "
        "deep_output 'linear', the embedding size, which it must be).",
        min=1,
        max=MAX_SIZE,
    )
    deep_output: Optional[Literal["maxout", "linear"]] = spec(
        None,
        "The papers' output layers, reading the state, the context and the previous word (replacing "
        "combine): 'maxout', max over pairs of U s + V Ey + C c + b (Bahdanau et al.); 'linear', "
        "Ey + L_h h + L_z z, the size of the embeddings (Show, Attend and Tell); null: combine.",
    )

    summary_input: bool = spec(
        False,
        "With attention type 'none': feed the encoder's final state to every decoder step and to its output, "
        "as Cho et al. 2014 do.",
    )

    def check(self):
        problems = []
        if self.placement == "before" and self.input_feeding:
            problems.append(("input_feeding", "placement 'before' feeds the context into the cell; set it false"))
        if self.combine == "residual" and self.output_size not in (None, self.units):
            problems.append(("output_size", f"combine 'residual' adds the context to the state: must be units ({self.units})"))
        if self.deep_output is not None and self.combine != "tanh":
            problems.append(("combine", f"deep_output {self.deep_output!r} replaces combine; leave it 'tanh'"))
        return problems


def _check_decoding(self):
    return [(name, message.removeprefix(f"{name}: ")) for name, message in decoding_settings.relation_problems(vars(self))]


# Made from the settings' one declaration: a field per setting, its bounds, its meaning, its rules.
DecodingConfig = make_dataclass(
    "DecodingConfig",
    [
        (setting.name, setting.python_type, spec(setting.default, setting.meaning, min=setting.low, max=setting.high))
        for setting in decoding_settings.SETTINGS
    ],
    namespace={"check": _check_decoding, "__module__": __name__},
)


@dataclass
class Seq2SeqModelConfig:
    embedding_dim: int = spec(64, "Size of the source and target embeddings.", min=1, max=MAX_SIZE)
    encoder: EncoderConfig = section(EncoderConfig, "The StackedRNN encoder.")
    decoder: DecoderConfig = section(DecoderConfig, "The AttentionDecoder.")
    attention: AttentionConfig = section(AttentionConfig, "The decoder's attention.")
    bridge: Literal["dense", "copy", "none"] = spec(
        "dense",
        "Decoder initial state: a dense projection of the encoder's final states, "
        "a copy of them (sizes must match), or zeros.",
    )
    decoding: DecodingConfig = section(DecodingConfig, "Search used for evaluation and export.")

    def check(self):
        problems = []
        if self.attention.type == "none":
            if self.bridge == "none" and not self.decoder.summary_input:
                problems.append(
                    ("bridge", "with attention type 'none' the decoder sees the source only through the bridge "
                     "or decoder.summary_input; use 'dense' or 'copy'")
                )
            if self.decoder.placement != "after":
                problems.append(("decoder.placement", "attention type 'none' has no attention to place; leave it 'after'"))
            for setting in decoding_settings.SETTINGS:
                if setting.needs_attention and getattr(self.decoding, setting.name) != setting.default:
                    problems.append((f"decoding.{setting.name}", "reads the attention over the source; attention type "
                                     f"'none' has none: expected {setting.default}"))
        elif self.decoder.summary_input:
            problems.append(
                ("decoder.summary_input", "feeds the encoder's final state in place of attention; needs attention.type 'none'")
            )
        if (
            self.attention.type == "luong"
            and self.attention.score == "dot"
            and self.encoder.output_dim != self.decoder.units
        ):
            problems.append(
                (
                    "attention.score",
                    f"'dot' needs encoder outputs ({self.encoder.output_dim}) of the size of "
                    f"decoder.units ({self.decoder.units}); use 'general' or 'concat'",
                )
            )
        if self.bridge == "copy":
            encoder_state = self.encoder.units * (2 if self.encoder.bidirectional else 1)
            if (
                self.encoder.num_layers != self.decoder.num_layers
                or self.encoder.cell_type != self.decoder.cell_type
                or encoder_state != self.decoder.units
            ):
                problems.append(
                    (
                        "bridge",
                        "'copy' needs encoder and decoder of the same cell type and number of "
                        f"layers, and encoder state size ({encoder_state}) equal to decoder.units "
                        f"({self.decoder.units}); use 'dense'",
                    )
                )
        return problems


@dataclass
class TrainingConfig:
    epochs: int = spec(10, "Passes over the training data.", min=1, max=MAX_EPOCHS)
    batch_size: int = spec(64, "Global batch size (split across replicas).", min=1, max=MAX_BATCH)
    optimizer: Literal["adam", "adamw", "sgd", "rmsprop"] = spec("adam", "Optimizer.")
    learning_rate: float = spec(1e-3, "Learning rate.", min=1e-12)
    clipnorm: Optional[float] = spec(5.0, "Gradient norm clipping (null: none).", min=1e-12)
    weight_decay: Optional[float] = spec(
        None,
        "Decoupled weight decay: each step multiplies the weights by (1 - learning_rate * weight_decay), "
        "biases and embeddings included (null: the optimizer's own, none except adamw's 0.004).",
        min=0.0,
    )
    early_stopping_patience: Optional[int] = spec(
        None, "Epochs without a better `monitor` value before stopping (null: never).", min=1, max=MAX_EPOCHS
    )
    monitor: str = spec(
        "val_loss",
        "Validation metric that picks the best checkpoint and drives early stopping: val_loss, "
        "or a score the task reports (val_token_accuracy for translation, val_accuracy for sentiment, val_f1, "
        "the decoded entities' F1, for ner; val_bleu_4, the BLEU-4 of the validation images' decoded captions, "
        "for captioning, at the cost of decoding them every epoch).",
    )
    max_minutes: Optional[float] = spec(
        None, "Stop training after this many minutes, mid-epoch if need be (null: no limit).", min=0.01
    )
    learning_rate_schedule: Literal["constant", "inverse_time", "cosine"] = spec(
        "constant",
        "How the learning rate changes with the epoch e (counted in steps, so a resumed run goes on where it "
        "was): 'constant'; 'inverse_time', learning_rate / (1 + learning_rate_decay * e) with whole epochs "
        "(Lample et al. 2016, Ma & Hovy 2016); 'cosine', from learning_rate down to 0 at the end of `epochs`.",
    )
    learning_rate_decay: float = spec(
        0.05, "Decay per epoch of the 'inverse_time' schedule (0.05: half the rate after 20 epochs).", min=0.0
    )
    ema_momentum: Optional[float] = spec(
        None,
        "Keep an exponential moving average of the weights, updated each step with this momentum (Polyak "
        "averaging; 0.999 averages over about the last 1,000 steps). Validation, the choice of the best epoch, "
        "the saved model, evaluation and the export then use the averaged weights; training goes on from the "
        "raw ones (null: no averaging).",
        min=0.0,
        below=1.0,
    )
    label_smoothing: float = spec(0.0, "Label smoothing of the cross-entropy.", min=0.0, below=1.0)
    checkpoint_every_steps: Optional[int] = spec(
        500,
        "Save a checkpoint (weights, optimizer, position in the data) every this many steps, as well as "
        "at each epoch's end; a killed run resumes from the last one (null: at epochs' ends only).",
        min=1,
        max=1_000_000_000,
    )
    keep_checkpoints: int = spec(
        2, "Step checkpoints kept, the newest; the best weights are kept apart in checkpoints/best.weights.h5.",
        min=1,
        max=1000,
    )
    average_last: int = spec(
        0,
        "At the end of training, average the weights of the last this many kept step checkpoints (at most "
        "keep_checkpoints; 0: none) and evaluate the average against the best epoch's weights on the validation data; "
        "the one that scores higher by the task's headline metric (BLEU, F1, accuracy) is kept for the held-out "
        "splits, model/model.keras and the export, and metrics.json and the model card say which.",
        min=0,
        max=1000,
    )
    precision: Literal["float32", "mixed_float16", "mixed_bfloat16"] = spec(
        "float32",
        "Keras dtype policy of the model: mixed policies compute in 16 bits and keep variables, "
        "softmax, attention weights, logits and the loss in float32 (mixed_float16 scales the loss).",
    )
    matmul_precision: Literal["default", "highest"] = spec(
        "default",
        "Float32 matrix products on accelerators, for training and evaluation alike: default lets NVIDIA GPUs "
        "(Ampere and later) use TensorFloat-32 (about 3 significant digits per product, several times faster); "
        "highest keeps every product in float32. CPUs compute in float32 either way; exports serve in float32.",
    )


@dataclass
class EvaluationConfig:
    batch_size: int = spec(
        64,
        "Inputs per batch when evaluating after training and in `seqtasks eval`: decoding, tagging, "
        "classifying (training.batch_size is for fit and its validation passes).",
        min=1,
        max=MAX_BATCH,
    )
    length_buckets: list[int] = spec(
        [5, 10, 15, 20, 30],
        "Translation and toy: upper edges of the source-length buckets (words; symbols for the toy) whose "
        "scores and counts evaluation reports beside the overall ones; the last bucket holds everything longer.",
        min=1,
        max=MAX_LENGTH,
    )

    def check(self):
        edges = self.length_buckets
        if not edges or any(edge < 1 for edge in edges) or any(b <= a for a, b in zip(edges, edges[1:])):
            return [("length_buckets", f"expected increasing positive lengths, such as [5, 10, 20]; got {edges}")]
        return []


@dataclass
class ExportConfig:
    enabled: bool = spec(True, "Export a SavedModel after training.")
    directory: str = spec(
        "",
        "Export root; the model goes to <directory>/<recipe name>/<version>/. A relative path in a "
        "recipe file starts at the recipe's folder, like data paths; with --set, at the current folder. "
        "Empty: saved_models/ in the current folder.",
        path=True,
    )

    def __post_init__(self):
        if not self.directory:
            self.directory = os.path.abspath("saved_models")


@dataclass
class DistributeConfig:
    strategy: Literal["auto", "one_device", "mirrored", "multi_worker", "tpu"] = spec(
        "auto",
        "tf.distribute strategy. 'auto': TPUStrategy when a TPU is visible (TPU_NAME or a local "
        "TPU), MultiWorkerMirroredStrategy when TF_CONFIG names more than one worker, "
        "MirroredStrategy over all GPUs when there are several, else the default strategy. "
        "training.batch_size is the global batch, split across replicas.",
    )
    devices: list[str] = spec([], "Devices for 'one_device' (the first) and 'mirrored' (all; empty: every GPU).")
    tpu: str = spec("", "'tpu': the TPU name or grpc:// address (empty: the local TPU).")

    def check(self):
        if self.devices and self.strategy in ("auto", "multi_worker", "tpu"):
            return [("devices", f"only for 'one_device' and 'mirrored'; strategy is {self.strategy!r}")]
        return []


def share(doc):
    return spec(0.0, doc, min=0.0, max=1.0)


def one_draw(config, names):
    """Case transforms are drawn once per example: their shares must add up to at most 1."""
    total = sum(getattr(config, name) for name in names)
    if total > 1:
        return [(names[0], f"{' + '.join(names)} are shares of one draw: expected at most 1 in all; got {total:g}")]
    return []


@dataclass
class WordVectorsConfig:
    path: str = spec(
        "",
        "Pretrained word vectors that start the word embeddings: GloVe, word2vec text or fastText .vec, plain "
        "or gzip (empty: learned from scratch). Their size must be the embeddings' (model.embedding_dim or "
        "model.word_embedding_dim). Read once, when a run starts; checkpoints and exports never need it again.",
        path=True,
    )
    fine_tune: Literal["always", "never", "after"] = spec(
        "always",
        "When training changes the vectors: 'always'; 'never' (frozen, Kim 2014's static vectors); 'after' "
        "fine_tune_after epochs frozen.",
    )
    fine_tune_after: int = spec(1, "With fine_tune 'after': the epochs the vectors stay frozen.", min=1, max=MAX_EPOCHS)
    extend_vocabulary: int = spec(
        0,
        "The file's first (most frequent) words added to the task's vocabulary with their vectors, so words "
        "never seen in training are not [UNK] (0: the training vocabulary only).",
        min=0,
        max=MAX_VOCAB,
    )


@dataclass
class Recipe:
    """A whole recipe; `data` and `model` take the types the task table gives its task."""

    task: str = spec("", "The task to run; see `seqtasks recipes` and the task table.")
    name: str = spec("", "Run and export folder name (default: the recipe file's stem).")
    description: str = spec("", "One line shown by `seqtasks recipes`.")
    seed: int = spec(0, "Seed of data splits, shuffling and weight initialisation.", min=0, max=MAX_SEED)
    backend: Literal["auto", "tensorflow", "jax"] = spec(
        "auto",
        "Keras backend that trains and evaluates ('auto': KERAS_BACKEND, else Keras' configuration, else "
        "tensorflow); a run folder's recipe.yaml records the one used. Exports are built under TensorFlow "
        "whatever trained.",
    )
    data: Any = spec(None, "Task-specific data section.")
    model: Any = spec(None, "Task-specific model section.")
    training: TrainingConfig = section(TrainingConfig, "Optimisation and fit settings.")
    evaluation: EvaluationConfig = section(EvaluationConfig, "Evaluation after training and by `seqtasks eval`.")
    export: ExportConfig = section(ExportConfig, "SavedModel export.")
    distribute: DistributeConfig = section(DistributeConfig, "tf.distribute strategy.")
