"""The recipe's typed sections.

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
from seqtasks.text.pretokenizers import PRETOKENIZERS
from seqtasks.text.special_ids import SMALLEST_SENTENCEPIECE_VOCAB
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


@dataclass
class ToyDataConfig:
    train_size: int = spec(4000, "Generated training examples.", min=1, max=MAX_EXAMPLES)
    validation_size: int = spec(400, "Generated validation examples.", min=1, max=MAX_EXAMPLES)
    min_length: int = spec(3, "Shortest digit sequence.", min=1, max=MAX_LENGTH)
    max_length: int = spec(10, "Longest digit sequence.", min=1, max=MAX_LENGTH)
    num_symbols: int = spec(10, "Distinct digits (0 to num_symbols - 1).", min=2, max=10)

    def check(self):
        if self.min_length > self.max_length:
            return [("min_length", f"must not exceed max_length ({self.max_length}); got {self.min_length}")]
        return []


def _share(doc):
    return spec(0.0, doc, min=0.0, max=1.0)


def _one_draw(config, names):
    """Case transforms are drawn once per example: their shares must add up to at most 1."""
    total = sum(getattr(config, name) for name in names)
    if total > 1:
        return [(names[0], f"{' + '.join(names)} are shares of one draw: expected at most 1 in all; got {total:g}")]
    return []


_CASE_SHARES = ("lower_case", "upper_case", "title_case")


@dataclass
class PairAugmentConfig:
    lower_case: float = _share("Share of training pairs whose source is lower-cased; the target keeps its case.")
    upper_case: float = _share("Share whose source and target are upper-cased.")
    title_case: float = _share(
        "Share whose source and target are title-cased: each word's first letter upper-cased, the others lowered. "
        "The three case shares are of one draw: at most 1 in all."
    )
    drop_punctuation: float = _share(
        "Share whose source loses its final . ! ? … and its opening ¿ ¡; the target keeps them."
    )
    strip_accents: float = _share(
        "Share whose source loses its accents and other marks (á -> a, ñ -> n, ü -> u); the target keeps them."
    )
    typos: float = _share("Share whose source gets one typo: a letter dropped, doubled or swapped with the next character.")
    join: float = _share(
        "Share of training pairs joined with the pairs after them in the epoch's order into one longer example: "
        "as sentences of one text, or, where every part is a statement, as one sentence joined by commas or "
        "`conjunctions`. A joined example may hold join_max x max_length subwords a side, which is then the "
        "longest sentence the export reads whole."
    )
    join_max: int = spec(3, "Most pairs in a joined example (2 to join_max, drawn uniformly).", min=2, max=16)
    conjunctions: list[str] = spec(
        [], "A source and a target word that may join two statements into one sentence, such as [y, and] (empty: commas only)."
    )

    def check(self):
        problems = _one_draw(self, _CASE_SHARES)
        if self.conjunctions and (len(self.conjunctions) != 2 or not all(w.strip() == w and w for w in self.conjunctions)):
            problems.append(("conjunctions", f"expected two words, the source's and the target's; got {self.conjunctions}"))
        return problems

    @property
    def enabled(self):
        return any(getattr(self, name) > 0 for name in (*_CASE_SHARES, "drop_punctuation", "strip_accents", "typos", "join"))


@dataclass
class TokenAugmentConfig:
    lower_case: float = _share("Share of training sentences whose tokens are lower-cased; the tags are unchanged.")
    upper_case: float = _share(
        "Share whose tokens are upper-cased; the tags are unchanged. With lower_case, a share of one draw: at most 1 "
        "in all."
    )

    def check(self):
        return _one_draw(self, ("lower_case", "upper_case"))

    @property
    def enabled(self):
        return self.lower_case > 0 or self.upper_case > 0


@dataclass
class TranslationDataConfig:
    path: str = spec(
        "",
        "Tab-separated sentence pairs, plain or gzip. A relative path in a recipe file "
        "starts at the recipe's folder; one given with --set, at the current folder.",
        path=True,
    )
    url: str = spec("", "Where the data set can be downloaded; for reference only, never fetched.")
    source_column: int = spec(1, "0-based column of the source sentence.", min=0, max=MAX_COLUMN)
    target_column: int = spec(0, "0-based column of the target sentence.", min=0, max=MAX_COLUMN)
    encoding: str = spec("utf-8", "Text encoding of the file.")
    validation_size: int = spec(2000, "Pairs split off for validation (by source sentence).", min=1, max=MAX_EXAMPLES)
    split_seed: Optional[int] = spec(
        None,
        "Seed of the validation split (null: the recipe's seed), so runs of other seeds, for an "
        "ensemble, share one split.",
        min=0,
        max=MAX_SEED,
    )
    max_length: int = spec(
        40,
        "Training pairs with more subwords on either side are left out.",
        min=1,
        max=MAX_LENGTH,
    )
    split_longer_than: Optional[int] = spec(
        None,
        "The export reads a sentence of up to this many subwords whole and a longer one in parts, cut after its "
        "clause punctuation (, ; :), else between words, each part translated on its own (null: the longest "
        "source trained on, max_length, or max_length x augment.join_max where augment.join joins pairs).",
        min=1,
        max=MAX_LENGTH,
    )
    tokenizer: Literal["wordpiece", "sentencepiece"] = spec(
        "wordpiece",
        "The subwords: 'sentencepiece' keeps case and spacing, so outputs read as a person writes them, and "
        "falls back to UTF-8 bytes for unseen characters (never [UNK]); 'wordpiece' splits punctuation off "
        "and joins it back by rule.",
    )
    sentencepiece_model: Literal["unigram", "bpe"] = spec("unigram", "The SentencePiece algorithm.")
    shared_vocabulary: bool = spec(
        False, "One vocabulary of source_vocab_size subwords learned from both sides, used for both."
    )
    source_vocab_size: int = spec(8000, "Target size of the source subword vocabulary.", min=10, max=MAX_VOCAB)
    target_vocab_size: int = spec(8000, "Target size of the target subword vocabulary.", min=10, max=MAX_VOCAB)
    lower_case: bool = spec(True, "Case-fold both sides before tokenizing.")
    augment: PairAugmentConfig = section(
        PairAugmentConfig,
        "Training pairs as people type them, a share each, drawn afresh every epoch from the seed "
        "(seqtasks.data.augmentation).",
    )

    def check(self):
        if not self.path:
            return [("path", "required: the file of sentence pairs")]
        if self.source_column == self.target_column:
            return [("target_column", f"must differ from source_column ({self.source_column})")]
        if self.tokenizer == "sentencepiece":
            for name in ("source_vocab_size", "target_vocab_size"):
                if getattr(self, name) < SMALLEST_SENTENCEPIECE_VOCAB:
                    return [(name, f"at least {SMALLEST_SENTENCEPIECE_VOCAB} for sentencepiece (256 byte pieces); "
                             f"got {getattr(self, name)}")]
        return []


@dataclass
class TextClassificationDataConfig:
    format: Literal["csv", "tsv", "folders", "lines"] = spec(
        "csv",
        "How the labelled texts are stored: 'csv' (a header row naming text_column and "
        "label_column), 'tsv' (label<TAB>text lines), 'folders' (one sub-folder of .txt files "
        "per label, the aclImdb layout), 'lines' (one text per line in one file per label, "
        "named <path>.<label>).",
    )
    path: str = spec(
        "",
        "Training data (plain or gzip): a file, a folder for 'folders', the common file name "
        "prefix for 'lines'. Relative paths start at the recipe's folder.",
        path=True,
    )
    validation_path: str = spec(
        "", "Validation data in the same format (empty: split validation_size examples off path).", path=True
    )
    validation_size: int = spec(
        1000, "Examples split off for validation when there is no validation_path.", min=1, max=MAX_EXAMPLES
    )
    url: str = spec("", "Where the data set can be downloaded; for reference only, never fetched.")
    text_column: str = spec("text", "CSV column holding the text.")
    label_column: str = spec("label", "CSV column holding the label.")
    header: bool = spec(True, "Whether a 'tsv' file starts with a header row.")
    labels: list[str] = spec(
        [],
        "Label values as they appear in the data, in class order (empty: the sorted values of "
        "the training data; for 'folders' the sub-folders). Required for 'lines'.",
    )
    label_names: list[str] = spec(
        [], "Names reported and served for the labels, in the same order (empty: the labels)."
    )
    encoding: str = spec("utf-8", "Text encoding of the files.")
    lower_case: bool = spec(True, "Case-fold texts before tokenizing.")
    strip_html: bool = spec(False, "Replace HTML tags such as <br /> by spaces (IMDB reviews).")
    tokenizer: Literal["wordpiece", "words"] = spec(
        "wordpiece",
        "'wordpiece': subwords learned from the training texts; 'words': words and punctuation as GloVe "
        "reads them (clitics such as n't and 's apart), looked up in the training words.",
    )
    vocab_size: int = spec(
        8000, "Target size of the WordPiece vocabulary, or the most frequent training words kept.", min=10,
        max=MAX_VOCAB,
    )
    max_length: int = spec(200, "Tokens kept per text, in training and serving.", min=1, max=MAX_LENGTH)
    keep: Literal["first", "last"] = spec(
        "first", "Which tokens of a longer text are kept: the first or the last max_length."
    )

    def check(self):
        if not self.path:
            return [("path", "required: the labelled training data")]
        if self.format == "lines" and not self.labels:
            return [("labels", "required for the 'lines' format: the file name suffixes, e.g. [neg, pos]")]
        if self.label_names and len(self.label_names) != len(self.labels):
            return [
                (
                    "label_names",
                    f"expected one name per entry of data.labels ({len(self.labels)}); got {len(self.label_names)}",
                )
            ]
        if len(set(self.labels)) != len(self.labels):
            return [("labels", "contains a label twice")]
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
class TextClassifierModelConfig:
    embedding_dim: int = spec(128, "Size of the subword (or word) embeddings.", min=1, max=MAX_SIZE)
    word_vectors: WordVectorsConfig = section(
        WordVectorsConfig, "Pretrained vectors for the embeddings; needs data.tokenizer 'words'."
    )
    embedding_dropout: float = spec(0.0, "Dropout on the embeddings.", min=0.0, below=1.0)
    encoder: EncoderConfig = section(EncoderConfig, "The StackedRNN reading the text.")
    pooling: Literal["last", "attention", "max", "structured"] = spec(
        "last",
        "What the classifier reads: the final states at the last real step (both directions "
        "when bidirectional), an attention-weighted average of all states, the largest value of each "
        "state feature over the real steps, or several attention hops side by side (Lin et al. 2017).",
    )
    attention_units: int = spec(
        64, "Size of the attention pooling's (and the self-attention block's) hidden layer.", min=1, max=MAX_SIZE
    )
    self_attention: Literal["none", "luong", "bahdanau"] = spec(
        "none",
        "A SelfAttentionBlock over the encoder outputs before pooling (every output attends over the text's "
        "outputs, residual + layer norm), with Luong's general score or Bahdanau's; needs a pooling other "
        "than 'last'.",
    )
    hops: int = spec(4, "With pooling 'structured': the attention hops (Lin et al. 2017's r).", min=1, max=64)
    hop_penalty: float = spec(
        1.0, "With pooling 'structured': the weight of the penalty on overlapping hops.", min=0.0, max=1000.0
    )
    dropout: float = spec(0.0, "Dropout before the classifier.", min=0.0, below=1.0)
    ensemble: int = spec(
        1,
        "Classifiers of these settings trained side by side from different initial weights, each with its own "
        "loss term (the training loss is their sum); validation, evaluation and the export use the mean of their "
        "class probabilities. Training time and parameters grow about this many times.",
        min=1,
        max=MAX_ENSEMBLE,
    )

    def check(self):
        if self.self_attention != "none" and self.pooling == "last":
            return [("self_attention", "needs pooling 'attention', 'max' or 'structured': 'last' reads the "
                                       "encoder's final states, which the block does not change")]
        return []

    def check_data(self, data):
        """Problems across the model and data sections, as `(path under model, message)` pairs."""
        if self.word_vectors.path and data.tokenizer != "words":
            return [("word_vectors.path", "pretrained vectors are of words: set data.tokenizer to 'words'")]
        return []


@dataclass
class TaggingDataConfig:
    path: str = spec(
        "", "Training sentences, a CoNLL column file (plain or gzip). Relative paths start at the recipe's folder.",
        path=True,
    )
    validation_path: str = spec(
        "", "Validation sentences in the same format (empty: split validation_size sentences off path).", path=True
    )
    validation_size: int = spec(
        500, "Sentences split off for validation when there is no validation_path.", min=1, max=MAX_EXAMPLES
    )
    heldout_documents: int = spec(
        0,
        "Documents (the parts between -DOCSTART- lines) of the training file set aside, picked by the seed: "
        "never trained on nor used to choose the best epoch, they are tagged after training and their F1 is "
        "reported as `heldout` beside the validation F1, to see how much of the validation score is fitted "
        "to the validation data (0: none).",
        min=0,
        max=MAX_EXAMPLES,
    )
    heldout_sentences: int = spec(
        0,
        "Sentences of the training file set aside, picked by the seed, for files without documents "
        "(tweets): reported as `heldout`, as heldout_documents are (0: none).",
        min=0,
        max=MAX_EXAMPLES,
    )
    url: str = spec("", "Where the data set can be downloaded; for reference only, never fetched.")
    token_column: int = spec(0, "0-based column of the token.", min=0, max=MAX_COLUMN)
    tag_column: int = spec(
        -1, "Column of the tag; negative counts from the end (-1: the last).", min=-MAX_COLUMN, max=MAX_COLUMN
    )
    scheme: Literal["iob1", "iob2"] = spec(
        "iob2", "Tag scheme of the files; 'iob1' (CoNLL-2003) is converted to IOB2 when read."
    )
    encoding: str = spec("utf-8", "Text encoding of the files.")
    lower_case: bool = spec(
        True, "Look words up lower-cased, with digits as 0 (case and digits still reach the model as features)."
    )
    min_word_count: int = spec(1, "Training words seen fewer times are [UNK].", min=1, max=MAX_EXAMPLES)
    max_word_length: int = spec(20, "Characters of each word read by the character features.", min=1, max=1000)
    max_length: int = spec(200, "Tokens tagged per served sentence; later tokens are cut off.", min=1, max=MAX_LENGTH)
    pretokenizer: Literal[PRETOKENIZERS] = spec(
        "whitespace",
        "How the export splits a raw text into tokens, inside the graph: the convention the training data was "
        "made with. 'whitespace': at whitespace only; 'treebank': Penn Treebank and CoNLL-2003 (punctuation, "
        "brackets, quotes and 's / n't split off; 'U.S.', '3.5', 'e-mail' whole); 'tweet': keeps URLs, "
        "@mentions, #hashtags, emoticons and emoji whole (seqtasks.text.pretokenizers).",
    )
    augment: TokenAugmentConfig = section(
        TokenAugmentConfig,
        "Training sentences as people type them: a share lower-cased and a share upper-cased, drawn afresh "
        "every epoch from the seed (seqtasks.data.augmentation).",
    )

    def check(self):
        if not self.path:
            return [("path", "required: the CoNLL training file")]
        if self.tag_column >= 0 and self.tag_column == self.token_column:
            return [("tag_column", f"must differ from token_column ({self.token_column})")]
        if self.heldout_sentences and self.heldout_documents:
            return [("heldout_sentences", "set aside documents or sentences, not both (heldout_documents is set)")]
        return []


@dataclass
class TaggerModelConfig:
    word_embedding_dim: int = spec(100, "Size of the word embeddings.", min=1, max=MAX_SIZE)
    word_vectors: WordVectorsConfig = section(WordVectorsConfig, "Pretrained vectors for the word embeddings.")
    word_dropout: float = spec(
        0.0, "Probability of reading a training word as [UNK], so the model learns to use spelling.",
        min=0.0, below=1.0,
    )
    singleton_unk: float = spec(
        0.0,
        "Probability of reading a word seen once in the training data as [UNK], drawn anew each time it is "
        "read in training (Lample et al. 2016 use 0.5): [UNK] learns to stand for rare words, as unseen ones "
        "are at test time. With data.min_word_count above 1 no word seen once is in the vocabulary.",
        min=0.0,
        below=1.0,
    )
    char_embedding_dim: int = spec(30, "Size of the character embeddings.", min=1, max=MAX_SIZE)
    char_filters: int = spec(50, "Character CNN filters (0: no character features).", min=0, max=MAX_SIZE)
    char_kernel_size: int = spec(3, "Characters each character filter reads.", min=1, max=1000)
    casing: bool = spec(True, "Give each word a one-hot casing feature (lower, UPPER, Title, digits, mixed).")
    encoder: EncoderConfig = section(EncoderConfig, "The StackedRNN over the words; bidirectional for tagging.")
    dropout: float = spec(0.5, "Dropout on the word features and on the encoder outputs.", min=0.0, below=1.0)
    output: Literal["crf", "softmax"] = spec(
        "crf", "Tag decision: a CRF with Viterbi decoding, or an independent softmax per token."
    )
    self_attention: Literal["none", "luong", "bahdanau"] = spec(
        "none",
        "A SelfAttentionBlock over the encoder outputs (every word's state attends over the sentence's, "
        "residual + layer norm), with Luong's general score or Bahdanau's.",
    )
    self_attention_units: int = spec(64, "The Bahdanau self-attention's hidden size.", min=1, max=MAX_SIZE)
    ensemble: int = spec(
        1,
        "Taggers of these settings trained side by side from different initial weights, each with its own loss "
        "term (the training and validation losses are their sums); evaluation and the export decode with the "
        "mean of their scores (with a CRF: of their potentials and transition scores). Training time and parameters "
        "grow about this many times.",
        min=1,
        max=MAX_ENSEMBLE,
    )


@dataclass
class CaptioningDataConfig:
    format: Literal["flickr", "coco"] = spec(
        "flickr",
        "'flickr': one caption file of '<image>#<n><TAB><caption>' lines (Flickr8k.token.txt) "
        "with split lists naming the images; 'coco': COCO captions JSON files, one per split.",
    )
    captions: str = spec(
        "", "Caption file ('flickr'), or the training captions JSON ('coco'); plain or gzip.", path=True
    )
    validation_captions: str = spec("", "'coco' only: the validation captions JSON.", path=True)
    train_split: str = spec(
        "", "'flickr': the list of training image names (Flickr_8k.trainImages.txt).", path=True
    )
    validation_split: str = spec(
        "", "'flickr': the list of validation image names (Flickr_8k.devImages.txt).", path=True
    )
    images: str = spec("", "Folder holding the image files the captions name.", path="folder")
    url: str = spec("", "Where the data set can be downloaded; for reference only, never fetched.")
    max_train_images: int = spec(0, "Use only the first this many training images (0: all).", min=0, max=MAX_EXAMPLES)
    max_validation_images: int = spec(
        0, "Use only the first this many validation images (0: all).", min=0, max=MAX_EXAMPLES
    )
    lower_case: bool = spec(True, "Case-fold captions.")
    strip_punctuation: bool = spec(
        True, "Replace punctuation and symbols in captions by spaces (training and references alike)."
    )
    vocab_size: int = spec(5000, "Target size of the WordPiece vocabulary of the captions.", min=10, max=MAX_VOCAB)
    max_length: int = spec(
        40, "Training captions with more subwords (plus [START] or [END]) are left out.", min=2, max=MAX_LENGTH
    )
    mirror_images: bool = spec(
        False,
        "Also train on the training images flipped left to right: each caption is read with its image or the "
        "mirror, at random every epoch (a frozen backbone's mirrored grids are cached too). Captions are not "
        "changed, so the few that say left or right are wrong for the mirror.",
    )
    feature_cache: str = spec(
        "",
        "Folder for the backbone's cached feature grids (empty: feature_cache/ in the output "
        "folder, beside the recipes' run folders).",
        path="written",
    )

    def check(self):
        if not self.captions:
            return [("captions", "required: the caption file")]
        if not self.images:
            return [("images", "required: the folder of images")]
        if self.format == "flickr" and not (self.train_split and self.validation_split):
            missing = "train_split" if not self.train_split else "validation_split"
            return [(missing, "required for the 'flickr' format: a list of image names")]
        if self.format == "coco" and not self.validation_captions:
            return [("validation_captions", "required for the 'coco' format: the validation captions JSON")]
        return []


@dataclass
class BackboneConfig:
    type: Literal["cnn", "file", "application"] = spec(
        "cnn",
        "Where the image grid comes from: 'cnn', a small CNN trained with the captioner from "
        "pixels; 'file', a frozen .keras image model whose output is a (H, W, C) feature map "
        "taking 0..255 RGB input; 'application', a frozen keras.applications model by name. "
        "Frozen backbones run once per image and their features are cached.",
    )
    path: str = spec("", "'file': the .keras model file.", path=True)
    name: str = spec("EfficientNetB0", "'application': the keras.applications model, e.g. ResNet50.")
    weights: Literal["imagenet", "none"] = spec(
        "imagenet", "'application': ImageNet weights (downloaded once by Keras) or random ones."
    )
    image_size: int = spec(
        224, "Square input size images are resized to ('cnn', 'application'; a file gives its own).", min=8, max=4096
    )
    filters: list[int] = spec(
        [32, 64, 128],
        "'cnn': filters of each 3x3 convolution + 2x2 max pooling stage; each stage halves the image, "
        "so image_size 2^n allows n stages.",
        max=MAX_SIZE,
    )
    fine_tune_from: str = spec(
        "",
        "'file', 'application': train the backbone's layers after this one with the captioner "
        "(e.g. block14_add, the last stage of EfficientNet-Lite0); features are cached at its "
        "output. Empty: the whole backbone stays frozen.",
    )

    def check(self):
        if self.type == "cnn" and self.fine_tune_from:
            return [("fine_tune_from", "only for a 'file' or 'application' backbone; the 'cnn' trains entirely")]
        if self.type == "file" and not self.path:
            return [("path", "required for a 'file' backbone: the .keras model")]
        stages = self.image_size.bit_length() - 1  # halvings that leave at least one pixel
        if self.type == "cnn" and len(self.filters) > stages:
            return [
                ("filters", f"image_size {self.image_size} allows at most {stages} stages; got {len(self.filters)}")
            ]
        if self.type == "cnn" and (not self.filters or any(f < 1 for f in self.filters)):
            return [("filters", f"expected a list of positive filter counts; got {self.filters}")]
        return []


@dataclass
class CaptionerModelConfig:
    backbone: BackboneConfig = section(BackboneConfig, "The image encoder giving the feature grid.")
    embedding_dim: int = spec(256, "Size of the word embeddings.", min=1, max=MAX_SIZE)
    feature_dropout: float = spec(0.0, "Dropout on the grid features while training.", min=0.0, below=1.0)
    embedding_dropout: float = spec(
        0.0, "Dropout on the word embeddings the decoder reads while training.", min=0.0, below=1.0
    )
    decoder: DecoderConfig = section(DecoderConfig, "The AttentionDecoder writing the caption.")
    attention: AttentionConfig = section(
        AttentionConfig, "Attention over the grid locations; Show, Attend and Tell uses bahdanau."
    )
    gate: bool = spec(True, "Scale the context by the learned gating scalar β of Show, Attend and Tell.")
    attention_penalty: float = spec(
        1.0, "λ of the doubly stochastic attention penalty λ·mean_i(1 - Σ_t α_ti)² (0: none).", min=0.0
    )
    scheduled_sampling: float = spec(
        0.0,
        "Scheduled sampling: the probability, at the last epoch, that a caption step reads a word drawn from the "
        "captioner's own distribution instead of the reference's; it rises linearly from 0 at the first epoch over "
        "training.epochs. Each training step costs one more forward pass (0: teacher forcing only).",
        min=0.0,
        max=1.0,
    )
    decoding: DecodingConfig = section(DecodingConfig, "Search used for evaluation and export.")
    ensemble: int = spec(
        1,
        "Captioners of these settings trained side by side from different initial weights, each with its own loss "
        "term (the training and validation losses are their sums); evaluation and the export decode with the mean "
        "of their log-probabilities at each step. Training time and parameters grow about this many times.",
        min=1,
        max=MAX_ENSEMBLE,
    )

    def check(self):
        if self.attention.type == "none":
            return [("attention.type", "captioning attends over the image grid; use 'bahdanau' or 'luong'")]
        if self.ensemble > 1 and self.backbone.fine_tune_from:
            return [("ensemble", "the members cannot share a fine-tuned backbone stage (backbone.fine_tune_from); "
                                 "expected 1 or no fine_tune_from")]
        if self.decoder.summary_input:
            return [("decoder.summary_input", "captioning attends over the image grid instead of reading a summary; set it false")]
        if self.attention.type == "luong" and self.attention.score == "dot":
            return [("attention.score", "'dot' needs grid features of the decoder's size; use 'general' or 'concat'")]
        return []


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
