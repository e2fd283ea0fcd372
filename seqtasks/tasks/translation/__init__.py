"""The translation task: sentences in, sentences out, through a subword attention encoder-decoder."""
