"""Where a run configuration comes from: named TOML files, inheritance, size variants and
command-line overrides, resolved to a `Config` (`.config`).

Named configurations live in ``scg_summarize/configs/NAME.toml``; one per row of the paper's
Table 1 (``STANDARD``, ``C2F+MULTI2``...). A file may say ``extends = "base"`` to start from
another file beside it (``"mine"`` or ``"mine.toml"``) or from any name ``--config`` takes
(``"C2F"``, ``"tiny-C2F+MULTI2"``); tables are merged key by key. Size variants are prefixes:
``small-NAME`` applies ``configs/_small.toml`` on top of ``NAME`` (laptop-CPU sizes) and
``tiny-NAME`` applies ``configs/_tiny.toml`` (tests). Option suffixes that are not rows of the
paper's Table 1 apply to any name: ``NAME+COPY`` adds the copying generator (``model.copy``;
e.g. ``small-C2F+MULTI2+COPY``). Finally ``--set table.key=value``
overrides anything; the value is parsed as TOML (``--set model.hidden=64``,
``--set train.optimizer='"adam"'`` or simply ``--set train.optimizer=adam``).

A ``--config`` with a ``/`` or a ``.toml`` suffix is a file path (`looks_like_path`), read or
refused as such; only a bare name selects a named configuration (docs/summarizer.md,
"Configurations").
"""

from __future__ import annotations

import copy
import functools
import os
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from ..models.config import ModelConfig
from .config import Config
from .schema import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "VARIANTS",
    "available_configs",
    "load_config",
    "parse_override",
]

#: name prefix -> overlay file
VARIANTS: dict[str, str] = {"small-": "_small.toml", "tiny-": "_tiny.toml"}
#: name suffix -> the options it sets (applied after the variant overlay, before ``--set``)
SUFFIXES: dict[str, dict[str, dict[str, Any]]] = {"+COPY": {"model": {"copy": True}}}


@functools.cache
def _config_dir() -> Path:
    return Path(str(resources.files("scg_summarize") / "configs"))


@functools.cache
def _read_packaged(path: Path) -> dict[str, Any]:
    """A configuration file shipped in the package, parsed once per process (read-only: copy it)."""
    with open(path, "rb") as f:
        data: dict[str, Any] = tomllib.load(f)
    return data


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _toml(path: Path) -> dict[str, Any]:
    """A configuration file's table; a TOML error, text that is not UTF-8 or a file that cannot be
    read names the file (a UTF-16 or binary file failed with ``'utf-8' codec can't decode byte
    0xff in position 0`` and no file named)."""
    try:
        with open(path, "rb") as f:
            data: dict[str, Any] = tomllib.load(f)
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"{path}: {err}") from None
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{path}: not UTF-8 text (byte 0x{err.object[err.start]:02x} at offset {err.start}); "
            "expected a TOML file, which is UTF-8"
        ) from None
    except OSError as err:
        raise ValueError(f"{path}: cannot read it ({err.strerror or err})") from None
    return data


def _read(path: Path, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """A configuration file with what it ``extends``: a file beside it (``"mine"`` or
    ``"mine.toml"``) or a named configuration (``"C2F"``, ``"tiny-C2F+MULTI2"``), merged below it."""
    data = copy.deepcopy(_read_packaged(path)) if path.parent == _config_dir() else _toml(path)
    parent = data.pop("extends", None)
    if parent:
        if not isinstance(parent, str):
            raise ValueError(f"{path}: extends must be a configuration name or file, got {parent!r}")
        if parent in seen:
            raise ValueError(f"configuration inheritance loop: {' -> '.join((*seen, parent))}")
        local = path.parent / (parent if parent.endswith(".toml") else f"{parent}.toml")
        if local.is_file():
            base = _read(local, (*seen, parent))
        else:
            try:
                base = _named(parent, (*seen, parent))
            except UnknownConfigError:
                raise ValueError(
                    f"{path}: extends {parent!r}, but there is no {local} nor a named configuration {parent!r} "
                    f"(scg-summarize train --list names them)"
                ) from None
        data = _merge(base, data)
    return data


class UnknownConfigError(ValueError):
    """A configuration name that is neither a named configuration (with its prefixes and
    suffixes) nor a file."""


def _named(name: str, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """The table of a named configuration: ``[tiny-|small-]BASE[+SUFFIX...]``, its size overlay and
    option suffixes merged over the packaged ``BASE.toml``."""
    if looks_like_path(name):  # (Path(_config_dir(), "./C2F.toml") is the packaged C2F)
        raise UnknownConfigError(f"{name!r}: a path, not the name of a configuration (names have no '/' or .toml)")
    base, overlay = name, None
    extras: list[dict[str, Any]] = []
    while True:  # NAME+COPY...: strip the option suffixes
        suffix = next((x for x in SUFFIXES if base.endswith(x) and len(base) > len(x)), None)
        if suffix is None:
            break
        base, extras = base[: -len(suffix)], [SUFFIXES[suffix], *extras]
    for prefix, file in VARIANTS.items():
        if name.startswith(prefix):
            base, overlay = base[len(prefix) :], file
            break
    file_path = _config_dir() / f"{base}.toml"
    if base.startswith("_") or not file_path.is_file():
        raise UnknownConfigError(
            f"unknown configuration {name!r}; available: {', '.join(available_configs())} "
            f"(prefix with {' or '.join(VARIANTS)} for the smaller sizes; "
            f"suffixes: {', '.join(SUFFIXES)}), or a path to a .toml file"
        )
    data = _read(file_path, seen)
    if overlay is not None:  # sizes for every family: the options of this one's
        sizes = _read(_config_dir() / overlay)
        table = ModelConfig.family_table(data.get("model", {}))[0].option_names()
        sizes["model"] = {k: v for k, v in sizes.get("model", {}).items() if k in table}
        data = _merge(data, sizes)
    for extra in extras:
        data = _merge(data, extra)
    return data


def available_configs(include_variants: bool = False) -> list[str]:
    """The named configurations (``base`` and overlays excluded), sorted."""
    names = sorted(p.stem for p in _config_dir().glob("*.toml") if not p.stem.startswith("_") and p.stem != "base")
    if include_variants:
        names += [prefix + n for prefix in VARIANTS for n in names]
    return names


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"model.hidden=64"`` -> ``(["model", "hidden"], 64)`` (the value parsed as TOML, else a string)."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"--set expects TABLE.KEY=VALUE, got {text!r}")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key.strip().split("."), value


def looks_like_path(name: str) -> bool:
    """Whether ``--config NAME`` is a file path rather than a named configuration: it has a
    directory separator (``./C2F``, ``configs/mine``) or ends in ``.toml``. A path is read as a
    file or refused (missing, a folder); it is never looked up among the named configurations,
    whose names have neither (``./C2F`` loaded the packaged ``C2F`` before)."""
    separators = {"/", os.sep, *((os.altsep,) if os.altsep else ())}
    return name.endswith(".toml") or any(sep in name for sep in separators)


def _named_hint(path: Path) -> str:
    """``; the named configuration 'C2F' is --config C2F`` when the file name of a missing ``path`` is
    a configuration's name (``./C2F``, ``C2F.toml``), else ""."""
    stem = path.name[: -len(".toml")] if path.name.endswith(".toml") else path.name
    try:
        _named(stem)
    except ValueError:
        return ""
    return f"; for the named configuration {stem!r}, give --config {stem}"


def load_config(name: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """Load a named configuration (or a ``.toml`` path), its variant overlay, then ``overrides``."""
    data: dict[str, Any]
    if isinstance(overrides, str):  # (each character would be an override)
        raise TypeError(f"load_config(overrides=...): expected a list of TABLE.KEY=VALUE strings, got {overrides!r}")
    if isinstance(name, Path):
        name = str(name)
    if not isinstance(name, str):
        raise TypeError(f"load_config(name): expected a configuration name or a .toml path, got {type(name).__name__}")
    path = Path(name)
    if looks_like_path(name) and path.is_file():
        data = _read(path)
        data.setdefault("name", path.stem)
    elif looks_like_path(name):  # (a path is never looked up among the named configurations)
        what = "a directory, not a file" if path.is_dir() else "no such file"
        raise UnknownConfigError(
            f"{name}: {what}; expected a configuration file (.toml) or the name of one "
            f"(a name has no '/' and no .toml suffix; scg-summarize train --list names them){_named_hint(path)}"
        )
    else:
        try:
            data = _named(name)
        except UnknownConfigError as err:  # (a bare name is never read as a file: say which file was meant)
            local = next((p for p in (Path(f"{name}.toml"), path) if p.is_file()), None)
            if local is None:
                raise
            raise UnknownConfigError(f"{err}; for the file {local}, give --config ./{local}") from None
        data["name"] = name
    problems: list[str] = []
    for text in overrides:
        try:
            keys, value = parse_override(text)
        except ValueError as err:
            problems.append(str(err))
            continue
        if len(keys) != 2:
            problems.append(f"--set expects TABLE.KEY=VALUE with one dot, got {text!r}")
            continue
        table = data.setdefault(keys[0], {})
        if not isinstance(table, dict):
            problems.append(f"--set {text!r}: {keys[0]} is not a table")
            continue
        table[keys[1]] = value
    try:
        config = Config.from_dict(data)
    except ConfigError as err:
        raise ConfigError(problems + err.problems) from None
    if problems:
        raise ConfigError(problems)
    return config
