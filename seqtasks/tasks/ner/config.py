"""The NER task's recipe sections: `data`, the CoNLL files and how training types them, and `model`, the tagger."""

from dataclasses import dataclass
from typing import Literal

from seqtasks.recipe.schema import (
    MAX_COLUMN,
    MAX_ENSEMBLE,
    MAX_EXAMPLES,
    MAX_LENGTH,
    MAX_SIZE,
    EncoderConfig,
    WordVectorsConfig,
    one_draw,
    section,
    share,
    spec,
)
from seqtasks.text.pretokenizers import PRETOKENIZERS


@dataclass
class TokenAugmentConfig:
    lower_case: float = share("Share of training sentences whose tokens are lower-cased; the tags are unchanged.")
    upper_case: float = share(
        "Share whose tokens are upper-cased; the tags are unchanged. With lower_case, a share of one draw: at most 1 "
        "in all."
    )

    def check(self):
        return one_draw(self, ("lower_case", "upper_case"))

    @property
    def enabled(self):
        return self.lower_case > 0 or self.upper_case > 0


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
