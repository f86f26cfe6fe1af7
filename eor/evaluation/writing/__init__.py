"""Every report eor writes, written one way: `writer` (the registry of report kinds, their sections and figures, and
`write_report`: JSON, figures, Markdown, page), the sections of each kind (`bench_sections`, `judge_sections`,
`erag_sections`), the figures (`figures` and `heatmaps` for `eor bench`, `erag_figures` for `eor erag` and `eor
utility`) and the page (`html`)."""
