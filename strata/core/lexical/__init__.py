"""The lexical index: one BM25 index over every kind of unit (bm25s, with Snowball
stemming), and its build from the flat token arrays a build keeps."""
