"""`ModelConfig`: the options every model family shares; each family extends it with its own.

A family registers with its configuration dataclass (`FAMILIES.register("c2f", C2FSummarizer,
config=C2FConfig)`, `.registry`), a subclass of `ModelConfig` in the family's folder:

==========  ======================================  ===========================================
family      configuration                           its options
==========  ======================================  ===========================================
``c2f``     `C2FConfig` (``c2f/config.py``)         LSTM depths, attention (Models 0-3), chunk
                                                    encoder, +POS, +MULTI, copying
``paulus``  ``PaulusConfig`` (``paulus/config.py``) intra-attentions, V_t, tied output layer
``abs``     ``AbsFamilyConfig`` (``abs/config.py``) ``abs_*``: enc(x, y_c), C, L, Q, V_x, V_y
``mal``     ``MALConfig`` (``mal/config.py``)       the Table 1 row (suatt, unatt), PageRank
==========  ======================================  ===========================================

`ModelConfig.from_dict` builds the dataclass of the table's ``model.family`` (``c2f`` when
absent) and names any key that family does not know.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from ..typed import check_field_types, did_you_mean

__all__ = ["ModelConfig", "positive_ints"]


def positive_ints(config: Any, *names: str) -> None:
    """``ValueError`` naming the first of ``names`` that is not a positive integer."""
    for name in names:
        value = getattr(config, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"model.{name} must be a positive integer, got {value!r}")


@dataclass(kw_only=True, slots=True)
class ModelConfig:
    """The options of every family (the ``[model]`` table's shared keys).

    Attributes:
        family: the model family (`.registry`): ``c2f`` (Ling & Rush 2017; the default),
            ``paulus`` (Paulus et al. 2018), ``abs`` (Rush et al. 2015) or ``mal`` (Li et al.).
        vocab_size: V (filled in from the prepared corpus when 0).
        num_chunks: M, the chunks per document (filled in from the corpus; C2F's +POS table).
        emb_dim: word embedding size E.
        hidden: the recurrent state size H.
        dropout: between layers and on the decoder output (families that use it).
        init_range: parameters start uniform in [-init_range, init_range].
        emb_init_std: if > 0, word embeddings start N(0, emb_init_std²) instead (ours: much
            faster escape from the uniform-attention plateau for small models).
        share_embeddings: one embedding table for source and target words.
    """

    family: str = "c2f"
    vocab_size: int = 0
    num_chunks: int = 0
    emb_dim: int = 500
    hidden: int = 500
    dropout: float = 0.3
    init_range: float = 0.1
    emb_init_std: float = 0.0
    share_embeddings: bool = False

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ``ValueError`` naming the option for an inconsistent configuration."""
        from .registry import FAMILIES  # lazy: the registry's built-in families import this module

        own = FAMILIES.config_class(self.family)
        if not isinstance(self, own):
            raise ValueError(
                f"model.family = {self.family!r} takes a {own.__name__} (its options: "
                f"{', '.join(own.option_names())}), not a {type(self).__name__}: build it with "
                f"ModelConfig.from_dict"
            )
        check_field_types(self, "model.")
        positive_ints(self, "emb_dim", "hidden")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"model.dropout must be in [0, 1), got {self.dropout!r}")
        for name in ("vocab_size", "num_chunks", "emb_init_std"):  # (0: read from the corpus, or not used)
            if getattr(self, name) < 0:
                raise ValueError(f"model.{name} must be >= 0, got {getattr(self, name)!r}")
        if self.init_range <= 0:
            raise ValueError(f"model.init_range must be > 0, got {self.init_range!r}")

    @classmethod
    def option_names(cls) -> list[str]:
        """The keys of this family's ``[model]`` table."""
        return [f.name for f in fields(cls)]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def family_table(cls, data: Mapping[str, Any], source: str = "") -> tuple[type[ModelConfig], dict[str, Any]]:
        """The configuration dataclass of ``data``'s family (``model.family``; when absent, ``cls``'s:
        ``c2f`` for `ModelConfig`) and the table to build it from.

        ``ValueError`` naming every key the family does not know, the family and ``source`` (the
        configuration).
        """
        from .registry import FAMILIES

        default = next(f.default for f in fields(cls) if f.name == "family")  # C2FConfig's: "c2f"
        family = str(data.get("family", default))
        own = FAMILIES.config_class(family)
        known = set(own.option_names())
        values = dict(data)
        unknown = sorted(set(values) - known)
        if unknown:
            where = f"{source}: " if source else ""
            raise ValueError(
                f"{where}{', '.join(f'model.{k}' for k in unknown)}: not an option of the {family!r} family"
                f"{did_you_mean(unknown[0], known)} "
                f"(model.family = {family!r}; its options: {', '.join(sorted(known))})"
            )
        return own, values

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "") -> ModelConfig:
        """The configuration of ``data``'s family (see `family_table`)."""
        own, values = cls.family_table(data, source)
        return own(**values)
