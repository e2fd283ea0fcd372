"""The translation task's recipe section: `data`, the sentence pairs and how training types them (its
`model` is the shared `Seq2SeqModelConfig`)."""

from dataclasses import dataclass
from typing import Literal, Optional

from seqtasks.recipe.schema import MAX_COLUMN, MAX_EXAMPLES, MAX_LENGTH, one_draw, section, share, spec
from seqtasks.text.special_ids import SMALLEST_SENTENCEPIECE_VOCAB
from seqtasks.utils.bounds import MAX_SEED, MAX_VOCAB

CASE_SHARES = ("lower_case", "upper_case", "title_case")


@dataclass
class PairAugmentConfig:
    lower_case: float = share("Share of training pairs whose source is lower-cased; the target keeps its case.")
    upper_case: float = share("Share whose source and target are upper-cased.")
    title_case: float = share(
        "Share whose source and target are title-cased: each word's first letter upper-cased, the others lowered. "
        "The three case shares are of one draw: at most 1 in all."
    )
    drop_punctuation: float = share(
        "Share whose source loses its final . ! ? … and its opening ¿ ¡; the target keeps them."
    )
    strip_accents: float = share(
        "Share whose source loses its accents and other marks (á -> a, ñ -> n, ü -> u); the target keeps them."
    )
    typos: float = share("Share whose source gets one typo: a letter dropped, doubled or swapped with the next character.")
    join: float = share(
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
        problems = one_draw(self, CASE_SHARES)
        if self.conjunctions and (len(self.conjunctions) != 2 or not all(w.strip() == w and w for w in self.conjunctions)):
            problems.append(("conjunctions", f"expected two words, the source's and the target's; got {self.conjunctions}"))
        return problems

    @property
    def enabled(self):
        return any(getattr(self, name) > 0 for name in (*CASE_SHARES, "drop_punctuation", "strip_accents", "typos", "join"))


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
