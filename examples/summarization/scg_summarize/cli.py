"""The ``scg-summarize`` command line: a small registry of subcommands.

Each subcommand is a `Command` ``(name, help, add_arguments, run)`` defined in its own
module. Modules are found in two places:

* `BUILTIN_COMMAND_MODULES` (``prepare`` lives in `scg_summarize.data.command`);
* every module of the package `COMMANDS_PACKAGE` (``scg_summarize/commands/*.py``),
  discovered at start-up -- add ``train``, ``demo``, ``evaluate``... there without touching
  this file.

A module exposes ``COMMAND`` (one `Command`) or ``COMMANDS`` (a sequence), or calls
`register` when imported. A module that fails to import does not break the other
commands: its error is shown only when that command is run. Planned commands that no module
provides yet are answered with a clear message instead of a traceback.

Start-up imports only the command that is run: a module that declares ``COMMAND =
Command(name=..., help=...)`` with literal strings is indexed from its source (`command_index`,
no import), so ``scg-summarize --help``, an unknown command or a usage error never pays for
torch; modules that register their commands otherwise are imported to find them.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import pkgutil
import sys
from collections.abc import Sequence
from pathlib import Path

from .subcommand import Command

__all__ = [
    "BUILTIN_COMMAND_MODULES",
    "COMMANDS_PACKAGE",
    "PLANNED_COMMANDS",
    "Command",
    "build_parser",
    "command_index",
    "load_commands",
    "main",
    "register",
]

BUILTIN_COMMAND_MODULES: tuple[str, ...] = ("scg_summarize.data.command",)
COMMANDS_PACKAGE = "scg_summarize.commands"
PLANNED_COMMANDS: tuple[str, ...] = (
    "prepare",
    "train",
    "demo",
    "summarize",
    "evaluate",
    "report",
    "visualize",
)


_REGISTRY: dict[str, Command] = {}


def register(command: Command) -> Command:
    """Add ``command`` to the registry (re-registering the same name replaces it)."""
    _REGISTRY[command.name] = command
    return command


def _broken_command(name: str, module: str, error: BaseException) -> Command:
    message = f"command {name!r} is unavailable: importing {module} failed: {error!r}"

    def run(_: argparse.Namespace) -> int:
        print(f"scg-summarize: {message}", file=sys.stderr)
        return 1

    return Command(name, f"(unavailable: import of {module} failed)", lambda _: None, run)


def _import_commands(module_name: str) -> None:
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name is not None and module_name.startswith(err.name):
            return  # the module (or its package) does not exist: nothing to register
        name = module_name.rsplit(".", 1)[-1]
        register(_broken_command(name, module_name, err))
        return
    except Exception as err:  # a broken module must not take the other commands down
        name = module_name.rsplit(".", 1)[-1]
        register(_broken_command(name, module_name, err))
        return
    found = list(getattr(module, "COMMANDS", ()))
    if hasattr(module, "COMMAND"):
        found.append(module.COMMAND)
    for command in found:
        register(command)


def load_commands() -> dict[str, Command]:
    """Import the built-in and discovered command modules; returns the registry."""
    for module_name in BUILTIN_COMMAND_MODULES:
        _import_commands(module_name)
    try:
        spec = importlib.util.find_spec(COMMANDS_PACKAGE)
    except ModuleNotFoundError:
        spec = None
    if spec is not None and spec.submodule_search_locations is not None:
        for info in pkgutil.iter_modules(spec.submodule_search_locations):
            if not info.name.startswith("_"):
                _import_commands(f"{COMMANDS_PACKAGE}.{info.name}")
    return dict(_REGISTRY)


def _source_path(module_name: str) -> Path | None:
    """The ``.py`` file of ``module_name``, found without importing its packages (whose
    ``__init__`` may import torch); None when there is none."""
    top, *rest = module_name.split(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ModuleNotFoundError, ValueError):
        return None
    if spec is None:
        return None
    if not rest:
        return Path(spec.origin) if spec.origin and spec.origin.endswith(".py") else None
    folders = [Path(p) for p in spec.submodule_search_locations or ()]
    for part in rest[:-1]:
        folders = [f / part for f in folders if (f / part).is_dir()]
    found = [f / f"{rest[-1]}.py" for f in folders if (f / f"{rest[-1]}.py").is_file()]
    return found[0] if found else None


def _declared(module_name: str) -> tuple[str, str] | None:
    """``(name, help)`` of the ``COMMAND = Command(NAME, HELP, ...)`` assignment in the module's
    source (literal strings, positional or keyword), without importing it; None when the module
    declares its commands otherwise (or cannot be read)."""
    path = _source_path(module_name)
    if path is None:
        return None
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    for node in tree.body:
        if not (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and any(isinstance(t, ast.Name) and t.id == "COMMAND" for t in node.targets)
        ):
            continue
        given = dict(zip(("name", "help"), node.value.args)) | {k.arg: k.value for k in node.value.keywords if k.arg}
        values = [given.get(key) for key in ("name", "help")]
        if all(isinstance(v, ast.Constant) and isinstance(v.value, str) for v in values):
            return values[0].value, values[1].value  # type: ignore[union-attr]
    return None


def _command_modules() -> list[str]:
    modules = list(BUILTIN_COMMAND_MODULES)
    try:
        spec = importlib.util.find_spec(COMMANDS_PACKAGE)
    except ModuleNotFoundError:
        spec = None
    if spec is not None and spec.submodule_search_locations is not None:
        modules += [
            f"{COMMANDS_PACKAGE}.{info.name}"
            for info in pkgutil.iter_modules(spec.submodule_search_locations)
            if not info.name.startswith("_")
        ]
    return modules


def command_index() -> dict[str, tuple[str, str]]:
    """Command name -> ``(module, help)`` for the modules that declare their ``COMMAND`` with
    literal strings (read from the source, not imported); the other modules are imported and
    registered (`register`)."""
    index: dict[str, tuple[str, str]] = {}
    for module_name in _command_modules():
        declared = _declared(module_name)
        if declared is None:
            _import_commands(module_name)
        else:
            index[declared[0]] = (module_name, declared[1])
    return index


def _listed(name: str, help_text: str) -> Command:
    """A command known from its module's source only: listed by ``--help``, never run."""

    def run(_: argparse.Namespace) -> int:  # pragma: no cover - main() imports the command it runs
        raise RuntimeError(f"command {name!r} was not imported")

    return Command(name, help_text, lambda _: None, run)


def _commands_for(first: str | None) -> dict[str, Command]:
    """The registry with the command ``first`` imported; the others are listed from their source."""
    index = command_index()
    if first in index:
        _import_commands(index[first][0])
    listed = {name: _listed(name, help_text) for name, (_, help_text) in index.items()}
    return {**listed, **_REGISTRY}


def build_parser(commands: dict[str, Command] | None = None) -> argparse.ArgumentParser:
    """The top-level parser with one subparser per registered command."""
    from . import __version__

    commands = load_commands() if commands is None else commands
    parser = argparse.ArgumentParser(
        prog="scg-summarize",
        description="Coarse-to-fine hard-attention summarization (Ling & Rush, 2017).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in sorted(commands):
        command = commands[name]
        sub_parser = sub.add_parser(name, help=command.help, description=command.help)
        command.add_arguments(sub_parser)
        sub_parser.set_defaults(_run=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``scg-summarize``; returns the exit status (never raises SystemExit)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    first = next((a for a in args_list if not a.startswith("-")), None)
    commands = _commands_for(first)
    parser = build_parser(commands)
    if first is not None and first not in commands and first in PLANNED_COMMANDS:
        print(
            f"scg-summarize: command {first!r} is not available in this installation yet "
            f"(available: {', '.join(sorted(commands)) or 'none'})",
            file=sys.stderr,
        )
        return 2
    try:
        args = parser.parse_args(args_list)
    except SystemExit as exit_:
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    run = getattr(args, "_run", None)
    if run is None:
        parser.print_help(sys.stderr)
        return 2
    status: int = run(args)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
