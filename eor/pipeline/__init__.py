"""The pipeline: the ensemble, the ways a batch is answered, its stages (retrieval, reading, generation,
voting), the members and the pool, the config's validation, abstention, and the executors that run it over a
file of questions (docs/architecture.md, "`eor ask`: one question, in order")."""
