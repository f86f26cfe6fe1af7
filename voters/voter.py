"""`Voter`: the EoR voter (paper section 4, eqs. 6-7) as a scikit-learn estimator.

The estimator itself (hyper-parameters, the weight search, decision scores) is `VoterModel`
(voters.voter_model); `Voter` subclasses it and adds what a fitted voter tells of itself: its description for
reports, the account of one vote (`explain_row`), and its weights-file document (voters.weights_file) both
ways (`to_document`, `save`, `from_document`). Dependencies run one way: this module imports the model, never
the reverse.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np

from eor.core.errors import ConfigError
from voters.grounding import Passages, grounding_features
from voters.nelder_mead import Weights
from voters.pooling import POOLINGS
from voters.scoring import VoteScorer
from voters.similarity import similarity_tensor
from voters.voter_model import VoterModel
from voters.weights_file import header, member_order, write_document


class Voter(VoterModel):
    """Weighted similarity voting over member answers, with weights learned by Nelder-Mead (the estimator and
    its hyper-parameters: voters.voter_model.VoterModel), with its account and weights file."""

    def describe(self) -> dict[str, Any]:
        """The fitted voter for reports: its kind, metrics, pooling and every learned weight."""
        self._check_fitted()
        names = self.members_ or [f"member{m}" for m in range(self.n_members_)]
        return {
            "voter": self.kind,
            "metrics": list(self.metric_names_),
            "pooling": self.pooling_,
            "retriever_weights": {name: float(w) for name, w in zip(names, self.retriever_weights_, strict=True)},
            "metric_weights": {
                name: float(w) for name, w in zip(self.metric_names_, self.metric_weights_, strict=True)
            },
            "grounding_weight": self.grounding_weight_,
            "member_threshold": float(self.member_threshold),
            "active": [names[i] for i in self.active_members_],
        }

    def explain_row(
        self, answers: Sequence[str], passages: Sequence[Passages], question: str, members: Sequence[int]
    ) -> dict[str, Any]:
        """Why the vote went as it did for one question: per answering member (positions `members`) its weight
        ω^r, whether the weight drops it, its similarity to every other member per metric and combined (eq. 6),
        its pooled similarity and decision score (eq. 7), and whether it is grounded; `question` is unused
        (the interface of every voter)."""
        self._check_fitted()
        index = self._positions(members)
        tensor = similarity_tensor(
            [list(answers)], list(self.metrics), cache=self.cache_dir, metric_params=self.metric_params
        )
        grounding = grounding_features([list(answers)], [list(passages)]) if self.needs_passages else None
        scorer = VoteScorer(tensor, grounding)
        weights = self.retriever_weights_[index]
        active = weights > self.member_threshold
        combined = scorer.combined(self.metric_weights_)[0]
        pooled = scorer.pooled(self.metric_weights_, active, self.pooling_, float(self.threshold))[0]
        scores = self._scores(tensor, grounding, index)[0]
        rows = []
        for m in range(len(answers)):
            row = {
                "weight": float(weights[m]),
                "dropped": not bool(active[m]),
                "similarity": {
                    n: {
                        **{metric: float(tensor[0, m, n, k]) for k, metric in enumerate(self.metrics)},
                        "combined": float(combined[m, n]),
                    }
                    for n in range(len(answers))
                    if n != m
                },
                "pooled": float(pooled[m]) if active[m] else None,
                "score": float(scores[m]) if np.isfinite(scores[m]) else None,
            }
            if grounding is not None:
                row["grounded"] = bool(grounding[0, m])
            rows.append(row)
        return {
            "voter": self.kind,
            "pooling": self.pooling_,
            "metric_weights": {metric: float(w) for metric, w in zip(self.metrics, self.metric_weights_, strict=True)},
            "grounding_weight": self.grounding_weight_,
            "member_threshold": float(self.member_threshold),
            "members": rows,
        }

    # -- the weights file (voters.weights_file) ----------------------------------------------------------

    def to_document(self, **meta: Any) -> dict[str, Any]:
        """The weights-file document of the fitted voter (what `save` writes). `meta`: reader, dataset,
        objective, ... (JSON values)."""
        self._check_fitted()
        meta.setdefault("objective", self.correctness)
        # the hyper-parameters in the order of __init__'s signature, as weights files have always listed them
        names = [name for name in inspect.signature(type(self).__init__).parameters if name != "self"]
        params = {name: getattr(self, name) for name in names}
        params["metrics"] = list(self.metrics)
        params["members"] = list(self.members) if self.members is not None else None
        params["cache_dir"] = str(self.cache_dir) if self.cache_dir is not None else None
        return {
            **header(self.kind, self.members_, self.metric_names_),
            "pooling": self.pooling_,
            "metric_weights": [float(w) for w in self.metric_weights_],
            "retriever_weights": [float(w) for w in self.retriever_weights_],
            "grounding_weight": self.grounding_weight_,
            "active_members": self.active_members_,
            "train_score": self.train_score_,
            "dev_score": self.dev_score_,
            "params": params,
            "meta": {**self.metadata_, **meta},
        }

    def save(self, path: str | Path, **meta: Any) -> Path:
        """Write the weights file (JSON), `to_document(**meta)`. `meta`: reader, dataset, objective, ... (JSON
        values)."""
        return write_document(path, self.to_document(**meta))

    @classmethod
    def from_document(cls, document: Mapping[str, Any], source: str, members: Sequence[str] | None = None) -> Self:
        """A fitted voter from a weights-file document (see `voters.load_voter`)."""
        if document.get("voter", cls.kind) != cls.kind:
            raise ConfigError(
                f"weights file {source!r} holds a {document.get('voter')!r} voter: load it with voters.load_voter"
            )
        try:
            params = dict(document["params"])
            metric_weights = [float(w) for w in document["metric_weights"]]
            retriever_weights = [float(w) for w in document["retriever_weights"]]
            pooling = str(document["pooling"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"weights file {source!r} is incomplete or malformed: {exc!r}") from None
        order = member_order(document.get("members"), members, len(retriever_weights), source)
        params["metrics"] = tuple(params.get("metrics", ()))
        if members is not None:
            params["members"] = list(members)
        voter = cls()
        voter.set_params(**params)
        voter._check_params()
        if len(metric_weights) != len(voter.metrics) or pooling not in POOLINGS:
            raise ConfigError(f"weights file {source!r} is inconsistent: metric weights or pooling do not match")
        grounding = document.get("grounding_weight")
        voter.set_weights(
            Weights(
                np.array(metric_weights),
                np.array(retriever_weights)[order],
                None if grounding is None else float(grounding),
                pooling,
            )
        )
        voter.train_score_ = document.get("train_score")
        voter.dev_score_ = document.get("dev_score")
        voter.metadata_ = dict(document.get("meta") or {})
        return voter
