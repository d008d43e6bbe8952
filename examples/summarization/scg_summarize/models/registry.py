"""`FAMILIES`: the model families by name, each with its configuration dataclass.

A **family** (``model.family``) is a `SummarizerFamily` subclass that builds its parts itself
(no part registries: its constructor is the place to read what a model is made of). It
registers once, with the configuration dataclass of its ``[model]`` table (a `ModelConfig`
subclass in the family's folder), as fairseq's ``register_model(name, dataclass=...)``:

    FAMILIES.register("c2f", C2FSummarizer, config=C2FConfig)

=============  ===================================  ==============================================
``family``     class                                configuration
=============  ===================================  ==============================================
``c2f``        `C2FSummarizer` (``c2f/model.py``)   `C2FConfig`
``paulus``     `PaulusSummarizer`                   ``PaulusConfig``
``abs``        ``AbsSummarizer``                    ``AbsFamilyConfig``
``mal``        ``MALSummarizer``                    ``MALConfig``
=============  ===================================  ==============================================

A checkpoint stores its configuration, so `build_model` rebuilds any family from it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .config import ModelConfig

if TYPE_CHECKING:
    from .family import SummarizerFamily

__all__ = ["FAMILIES", "FamilyRegistry", "build_model"]

FamilyT = TypeVar("FamilyT", bound=type)

#: modules that register the built-in families when imported
_BUILTIN_MODULES: tuple[str, ...] = ("c2f.model", "paulus.model", "abs.family", "mal.model")


@dataclass(frozen=True, slots=True)
class _Entry:
    family: type[Any]
    config: type[ModelConfig]


class FamilyRegistry:
    """Family names -> (family class, configuration dataclass)."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def register(self, name: str, family: FamilyT | None = None, *, config: type[ModelConfig]) -> Any:
        """Register ``family`` under ``name`` with its ``config`` dataclass (or use as a class
        decorator: ``@FAMILIES.register("name", config=MyConfig)``)."""
        if not name or not isinstance(name, str):
            raise ValueError(f"model.family: a registered name must be a non-empty string, got {name!r}")
        if not (isinstance(config, type) and issubclass(config, ModelConfig)):
            raise ValueError(f"model.family {name!r}: config must be a ModelConfig subclass, got {config!r}")

        def add(cls: FamilyT) -> FamilyT:
            known = self._entries.get(name)
            if known is not None and (known.family is not cls or known.config is not config):
                raise ValueError(f"model.family {name!r} is already registered ({known.family!r})")
            self._entries[name] = _Entry(cls, config)
            return cls

        return add if family is None else add(family)

    def _entry(self, name: str) -> _Entry:
        _load_builtins()
        try:
            return self._entries[name]
        except KeyError:
            raise ValueError(f"model.family must be one of {tuple(self.names())}, got {name!r}") from None

    def get(self, name: str) -> type[SummarizerFamily[Any, Any]]:
        """The family class of ``name``; ``ValueError`` naming the known ones otherwise."""
        family: type[SummarizerFamily[Any, Any]] = self._entry(name).family
        return family

    def config_class(self, name: str) -> type[ModelConfig]:
        """The configuration dataclass of family ``name``."""
        return self._entry(name).config

    def names(self) -> list[str]:
        _load_builtins()
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        _load_builtins()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


_loaded = False


def _load_builtins() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for module in _BUILTIN_MODULES:
            importlib.import_module(f"{__package__}.{module}")


FAMILIES = FamilyRegistry()


def build_model(config: ModelConfig) -> SummarizerFamily[Any, Any]:
    """The model of ``config``: ``FAMILIES.get(config.family)(config)``."""
    if not isinstance(config, ModelConfig):
        raise TypeError(
            f"build_model(config): expected a ModelConfig (ModelConfig.from_dict builds one from a [model] "
            f"table), got {type(config).__name__}"
        )
    build: Callable[[ModelConfig], SummarizerFamily[Any, Any]] = FAMILIES.get(config.family)
    return build(config)
