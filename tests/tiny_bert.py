"""A tiny BERT sequence classifier built from a config, with a word-level tokenizer (nothing is downloaded):
the stand-in model of the NLI similarity and BEM correctness tests."""

from __future__ import annotations

from pathlib import Path


def build_tiny_bert(
    folder: Path, words: list[str], id2label: dict[int, str], *, token_types: int = 2, seed: int = 0
) -> Path:
    """Save a 1-layer BERT classifier with `id2label` and its tokenizer over `words` into `folder`."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    vocab = {word: i for i, word in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *words])}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]"
    )
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        type_vocab_size=token_types,
        num_labels=len(id2label),
        id2label=id2label,
        label2id={label: index for index, label in id2label.items()},
        initializer_range=0.5,  # large random weights: different inputs give clearly different outputs
    )
    torch.manual_seed(seed)
    model = BertForSequenceClassification(config).eval()
    fast.save_pretrained(folder)
    model.save_pretrained(folder)
    return folder
