"""Text for the language model: the corpus that ships with tinyedu, and a byte-level BPE tokenizer."""

from tinyedu.text.bpe import BPE, END_OF_TEXT, merge_pair, most_frequent_pair, train_bpe
from tinyedu.text.corpus import corpus, corpus_modules, corpus_split
from tinyedu.text.split import SPLIT_PATTERN, pre_split

__all__ = ["BPE", "END_OF_TEXT", "SPLIT_PATTERN", "corpus", "corpus_modules", "corpus_split", "merge_pair",
           "most_frequent_pair", "pre_split", "train_bpe"]
