"""The ids every vocabulary of seqtasks reserves, in one place.

Vocabularies start with these tokens, so id 0 is padding everywhere: in token
ids, tag ids, character ids and decoded outputs.
"""

RESERVED_TOKENS = ("[PAD]", "[UNK]", "[START]", "[END]")
PAD_ID, UNK_ID, START_ID, END_ID = range(len(RESERVED_TOKENS))
# A SentencePiece vocabulary holds the 256 UTF-8 byte pieces (its fallback for unseen
# characters) and the reserved tokens before the first piece it learns.
SMALLEST_SENTENCEPIECE_VOCAB = 256 + len(RESERVED_TOKENS) + 1
