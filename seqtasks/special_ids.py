"""The ids every vocabulary of seqtasks reserves, in one place.

Vocabularies start with these tokens, so id 0 is padding everywhere: in token
ids, tag ids, character ids and decoded outputs.
"""

RESERVED_TOKENS = ("[PAD]", "[UNK]", "[START]", "[END]")
PAD_ID, UNK_ID, START_ID, END_ID = range(len(RESERVED_TOKENS))
