"""The sentiment task's recipe sections: `data`, the labelled texts, and `model`, the text classifier."""

from dataclasses import dataclass
from typing import Literal

from seqtasks.recipe.schema import (
    MAX_ENSEMBLE,
    MAX_EXAMPLES,
    MAX_LENGTH,
    MAX_SIZE,
    EncoderConfig,
    WordVectorsConfig,
    section,
    spec,
)
from seqtasks.utils.bounds import MAX_VOCAB


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
