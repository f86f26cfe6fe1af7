"""Runs, records and caches: a run folder's files (records, config, pool, generation), the records' typed
reading, the one cost model, and the generation cache. Imports the components and the leaves only; the
pipeline writes through it and every command reads through it (docs/architecture.md, "Layers")."""
