"""The leaves: eor's core types (the typed config, questions, results and records' lines, answers and their
normalization), its errors, the registry type and plugins, the atomic writer, the cache policy, the packaged
models, the prompt builder and the correctness metrics. A module here imports only other modules here, so
`retrievers`, `voters` and `eor.readers` can use any of them (docs/architecture.md, "Layers")."""
