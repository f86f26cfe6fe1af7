"""The ensemble's stages, each with its own failure policy: retrieval (eor.stages.retrieval), reading (each
member's answer prompt and answer, eor.stages.reading), generation (eor.stages.generation, the one way into the
reader) and the vote (eor.stages.voting); what a failed member leaves behind is eor.stages.failures.
`eor.ensemble.Ensemble` coordinates them, in the ways eor.answering chooses."""
