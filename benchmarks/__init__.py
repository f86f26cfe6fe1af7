"""Benchmarks and studies of eor, each a module run from the repository root as `python -m benchmarks.NAME`
(`--help` for its flags); clients of the project's public API only (tests/test_architecture.py). Not shipped.

- bench_cache: `eor run` twice, filling then served by a fresh generation cache
- bench_cascade: a cascade replayed on recorded answers against the full pool, the paper's voter and Top R
- bench_cascade_live: a live cascade against the full pool with the real reader
- bench_confidence_cv: the selector with and without the reader's confidence, cross-validated
- bench_corpus_scale: BM25 build and retrieval, `eor ask` and IVF-PQ over synthetic corpora up to 5M passages
- bench_faiss: FAISS index types for the dense source side by side
- bench_index_build: building and loading the BM25 and dense indexes of a corpus
- bench_lazy_voting: exact lazy voting replayed on recorded runs
- bench_prompt_rate: llama.cpp's prompt-evaluation rate by chunk size, threads and Q4_0
- bench_throughput: reader paths side by side on the same questions, cache off
- bench_voter_fit: a voter fit on a precomputed similarity tensor against recomputing it
- candidate_coverage: how often a gold answer is among the judge's candidates
- cascade_calibration: where a cascade's P(right) is right, per step it stops at
- check_recorded_retrieval: today's code retrieves and prompts as the records say
- compare_records: two runs of a pool, member by member, each difference explained
- design_families: what each family of candidate members adds to a base pool
- documents_import: how fast a folder of documents becomes a corpus (and its indexes)
- gpu_rates: a reader's and the passage encoder's rates on an accelerator
- judge_cv: what the reader as judge adds, by nested cross-validation
- judge_lost: where the judge voter's answers go wrong
- judge_pilot: what the reader as judge costs on recorded questions
- load_test: `eor serve` under N concurrent clients
- lost_questions: the questions a pool's voter answers wrong, and why
- nested_cv: EoR against Top R by nested cross-validation
- reading_failures: where a pool's members lose the answer they were given
- regenerate_outputs: every output the shipped records reproduce, for a byte-for-byte diff
- replay_cost: a cascade's reader seconds, recorded against replayed
- score_design: a frozen pool design scored once on held-out records
- tie_break: ties between different answers, and other tie-breaks
- validate_cost_model: `eor plan`'s prediction against a run it has not seen
"""
