"""Learning from records: the voter candidates and their cross-validation, P(right) and abstention
thresholds fitted out of fold, and the pool design's search. Reads records, never runs a model."""
