"""The pre-split: cut text into pieces (words, numbers, runs of punctuation, whitespace) before BPE.

Without it, BPE learns whatever pairs are frequent across the whole text, and many of them straddle a
word boundary: "e " (the end of a word and the space after it), "):\\n        " (a line's end and the
next line's indentation). A merge like that spends a vocabulary entry on an accident of neighbours.
GPT-2 first cuts the text with a regular expression and lets merges happen only inside a piece, so
every token is part of one word, one number, one run of punctuation or one run of whitespace.

GPT-2's pattern is written with Unicode classes (\\p{L} letters, \\p{N} numbers). Here the pattern is
written over *bytes* with four explicit byte classes, so that a few lines of C (the exported generator,
tinyedu/export/generator.py) cut exactly where Python does, on any input, valid UTF-8 or not:

    space   the six ASCII whitespace bytes: \\t \\n \\v \\f \\r and ' ' (0x09-0x0D, 0x20)
    letter  A-Z, a-z, and every byte from 0x80 to 0xFF: the bytes of a non-ASCII character are always
            >= 0x80, so "café" or "naïve" stays one piece (stray or broken UTF-8 bytes count as letters)
    digit   0-9
    other   every other byte: ASCII punctuation, symbols and control bytes

and the pattern, tried alternative by alternative at each position (the first that matches wins):

    '(?:[sdmt]|ll|ve|re)    an English contraction: 's 'd 'm 't 'll 've 're (case-sensitive, as GPT-2)
    ' '?letter+             a word, with at most one space before it (" return")
    ' '?digit+              a number, with at most one space before it
    ' '?other+              a run of punctuation, with at most one space before it ("):", " ==")
    space+(?!\\S)            a run of whitespace up to the end, or up to one before the next non-space
    space+                  else a single whitespace byte (a newline, a tab) before a non-space

The fifth alternative keeps the last space of a run for the word after it, so "x =    y" cuts as
"x", " =", "   ", " y": the word " y" is the same piece wherever it stands. Every byte is in one of the
four classes, so the pieces cover the text exactly: joined, they give the text back.
"""

from __future__ import annotations

import re

# --8<-- [start:pattern]
SPACE = rb"\t\n\x0b\x0c\r "
LETTER = rb"A-Za-z\x80-\xff"
DIGIT = rb"0-9"
SPLIT_PATTERN = re.compile(
    rb"'(?:[sdmt]|ll|ve|re)"
    rb"| ?[" + LETTER + rb"]+"
    rb"| ?[" + DIGIT + rb"]+"
    rb"| ?[^" + SPACE + LETTER + DIGIT + rb"]+"
    rb"|[" + SPACE + rb"]+(?![^" + SPACE + rb"])"
    rb"|[" + SPACE + rb"]+")
# --8<-- [end:pattern]


def pre_split(data: bytes) -> list[bytes]:
    """The pieces of `data` in order (joined, they are `data`); BPE merges only inside a piece."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"pre_split: expected bytes, got {type(data).__name__}")
    return SPLIT_PATTERN.findall(bytes(data))


__all__ = ["SPLIT_PATTERN", "pre_split"]
