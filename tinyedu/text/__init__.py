"""Text for the language model: the corpus that ships with tinyedu, and a byte-level BPE tokenizer."""

from tinyedu.text.bpe import BPE, merge_pair, most_frequent_pair, train_bpe
from tinyedu.text.corpus import corpus, corpus_modules, corpus_split

__all__ = ["BPE", "corpus", "corpus_modules", "corpus_split", "merge_pair", "most_frequent_pair", "train_bpe"]
