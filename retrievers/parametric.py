"""PK: the reader's parametric knowledge as a retriever (GenRead): it writes a background document."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, ClassVar, cast

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document

from eor.core.prompts import PromptTemplates
from retrievers.base import SourceRetriever, passage

if TYPE_CHECKING:
    from eor.readers.base import Reader


class ParametricRetriever(SourceRetriever):
    """One generated background document per query; all queries of a batch go to the reader at once."""

    source_name: str = "PK"
    withholds: ClassVar[bool] = True  # no corpus: nothing to withhold
    reader: object
    prompts: object = PromptTemplates()  # its `parametric_prompt` (eor.core.prompts, the one prompt builder)
    max_tokens: int = 256

    def _retrieve_uncached(
        self, queries: list[str], *, run_managers: list[CallbackManagerForRetrieverRun]
    ) -> list[list[Document]]:
        # fields of any object for pydantic: eor's reader (eor.readers.base.Reader) and prompt templates
        reader, templates = cast("Reader", self.reader), cast(PromptTemplates, self.prompts)
        prompts = [templates.parametric_prompt(query) for query in queries]
        outputs = reader.generate(prompts, max_tokens=self.max_tokens)
        return [
            [passage(text.strip(), id=_generated_id(self.source_name, text), source=self.source_name, generated=True)]
            if text.strip()
            else []
            for text in outputs
        ]


def _generated_id(source: str, text: str) -> str:
    return f"{source}:{hashlib.sha1(text.encode()).hexdigest()[:12]}"
