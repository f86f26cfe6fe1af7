"""Retrievers of eor: LangChain retrievers for BM25, dense (Wiki), parametric knowledge (PK) and
retrieval-free (ReFree) sources, the notation's operators, and the builder from member names."""
