"""eor: Ensemble-of-Retrievers question answering.

`from eor import Ensemble` loads the pipeline lazily, so importing eor stays instant.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Ensemble", "__version__"]

if TYPE_CHECKING:
    from eor.pipeline.ensemble import Ensemble


def __getattr__(name: str) -> Any:
    if name == "Ensemble":
        from eor.pipeline.ensemble import Ensemble

        return Ensemble
    raise AttributeError(f"module 'eor' has no attribute {name!r}")
