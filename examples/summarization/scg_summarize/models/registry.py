"""Registries of model families and their parts, selected by name from the configuration.

A **family** (``model.family``) is a small module that composes registered parts into an
``nn.Module`` honouring the family interface (see ``docs/summarizer.md``, "Adding a model
family"): ``encode``, ``init_state``, ``advance`` / ``step_log_probs`` / ``step``,
``corpus_ids``, ``forward(..., task="teacher" | "rollout")``, ``hard``, ``copies``,
``generator`` (with ``logits`` / ``output_layer``) and ``chunk_encoder_parameters``.

=================  ===========================================================================
registry           entries (built in)
=================  ===========================================================================
``FAMILIES``       ``c2f`` (:class:`~.summarizer.Summarizer`), ``paulus``
                   (:class:`~.paulus.PaulusSummarizer`), ``abs``
                   (:class:`~.abs.family.AbsSummarizer`), ``mal`` (:class:`~.mal.family.MALFamily`)
``ENCODERS``       ``flat_lstm``, ``chunked_lstm`` (:mod:`.encoders`)
``ATTENTIONS``     ``standard``, ``model1``, ``hier``, ``c2f`` (:mod:`.attention`),
                   ``bilinear``, ``intra_temporal``, ``intra_decoder`` (:mod:`.paulus`)
``GENERATORS``     ``softmax``, ``copy`` (:mod:`.generator`), ``pointer_switch`` (:mod:`.paulus`)
``DECODERS``       ``input_feed_lstm`` (:mod:`.decoder`), ``paulus_lstm`` (:mod:`.paulus`)
=================  ===========================================================================

Registering is one call, ``FAMILIES.register("name", builder)`` (or as a decorator); a
checkpoint stores its configuration, so :func:`build_model` rebuilds any family from it. A
family whose model depends on the corpus beyond the configuration (``abs``: separate input and
output vocabularies) may offer ``for_corpus(config, data_dir) -> model``, which the trainer
calls instead (it fills the configuration, so checkpoints still rebuild from it alone).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from torch import nn

__all__ = ["ATTENTIONS", "DECODERS", "ENCODERS", "FAMILIES", "GENERATORS", "Registry", "build_model"]

F = TypeVar("F", bound=Callable[..., Any])

#: modules that register the built-in entries when imported
_BUILTIN_MODULES: tuple[str, ...] = ("c2f.model", "paulus.model", "abs.family", "mal.family")


class Registry(Generic[F]):
    """Names -> factories of one kind of part.

    Args:
        kind: what the entries are (for error messages), e.g. ``"model.family"``.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, F] = {}

    def register(self, name: str, factory: F | None = None) -> Any:
        """Register ``factory`` under ``name`` (or use as ``@registry.register("name")``)."""
        if not name or not isinstance(name, str):
            raise ValueError(f"{self.kind}: a registered name must be a non-empty string, got {name!r}")

        def add(f: F) -> F:
            known = self._entries.get(name)
            if known is not None and known is not f:
                raise ValueError(f"{self.kind} {name!r} is already registered ({known!r})")
            self._entries[name] = f
            return f

        return add if factory is None else add(factory)

    def get(self, name: str) -> F:
        """The factory of ``name``; ``ValueError`` naming the known ones otherwise."""
        _load_builtins()
        try:
            return self._entries[name]
        except KeyError:
            raise ValueError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names())}") from None

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


FAMILIES: Registry[Callable[..., nn.Module]] = Registry("model.family")
ENCODERS: Registry[Callable[..., nn.Module]] = Registry("encoder")
ATTENTIONS: Registry[Callable[..., nn.Module]] = Registry("attention")
GENERATORS: Registry[Callable[..., nn.Module]] = Registry("generator")
DECODERS: Registry[Callable[..., nn.Module]] = Registry("decoder")


def build_model(config: Any) -> nn.Module:
    """The model of ``config`` (a :class:`~.config.ModelConfig`): ``FAMILIES[config.family](config)``."""
    family = getattr(config, "family", "c2f")
    model: nn.Module = FAMILIES.get(family)(config)
    return model
