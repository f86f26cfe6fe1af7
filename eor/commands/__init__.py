"""What the commands do, apart from their parsers (eor.cli): `eor run` (runner), `eor train` (train_command,
train_options), `eor design` (design_command), `eor plan` (plan_command), `eor import-*` (importers) and
`eor init` (starter)."""
