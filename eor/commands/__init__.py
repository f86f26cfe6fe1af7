"""What the commands do, apart from their parsers (eor.cli): `eor run` (runner, with run_identity, run_growth and
run_summary), `eor train` (train_command, train_options, train_report; train_judge and train_judge_cascade for the
judge), `eor design` (design_command), `eor plan` (plan_command), `eor import-*` (importers), `eor init` (starter),
`eor calibrate` (calibrate_command), and records that grow by the judge's scores (judge_records)."""
