"""One's own documents as a corpus: text extracted from each file by its format (`extract`), split into passages
of about a hundred words that keep their document's title, section heading, page and character offsets, under
ids stable across runs and machines (`split`)."""
