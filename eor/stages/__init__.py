"""The ensemble's stages, each with its own failure policy: retrieval (eor.stages.retrieval), generation
(eor.stages.generation, the one way into the reader) and the vote (eor.stages.voting). `eor.ensemble.Ensemble`
coordinates them."""
