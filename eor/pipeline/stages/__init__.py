"""The ensemble's stages, each with its own failure policy: retrieval (eor.pipeline.stages.retrieval), reading
(each member's answer prompt and answer, eor.pipeline.stages.reading), generation (eor.pipeline.stages.generation,
the one way into the reader) and the vote (eor.pipeline.stages.voting); what a failed member leaves behind is
eor.pipeline.stages.failures.
`eor.pipeline.ensemble.Ensemble` coordinates them, in the ways eor.pipeline.answering chooses."""
