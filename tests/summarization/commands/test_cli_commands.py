"""The static command list and the decoding settings generated from `DecodeOptions`' fields."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from scg_summarize import cli
from scg_summarize.commands._decoding_args import add_decode_arguments, decode_options, given_options
from scg_summarize.decode_options import DecodeOptions, Setting, option_problems
from scg_summarize.train.config import Config, EvalConfig
from scg_summarize.train.config_loading import load_config

COMMANDS_DIR = Path(cli.__file__).parent / "commands"

#: per field, a value that is not its default (each must be pinned by a run and by a flag)
PINNED: dict[str, tuple[Any, list[str]]] = {
    "beam_size": (6, ["--beam", "6"]),
    "greedy": (True, ["--greedy"]),
    "max_len": (25, ["--max-len", "25"]),
    "min_len": (2, ["--min-len", "2"]),
    "length_penalty": (0.5, ["--length-penalty", "0.5"]),
    "no_repeat_ngram": (2, ["--no-repeat-ngram", "2"]),
    "unk": ("forbid", ["--unk", "forbid"]),
    "no_repeat_word": (True, ["--block-repeats"]),
    "block_digits": (True, ["--block-digits"]),
    "n_best": (1, ["--n-best", "1"]),  # (the only value that fits greedy search; checked apart below)
    "extras": (("coarse_attn",), ["--extras", "coarse_attn"]),
    "recombine": (True, ["--recombine"]),
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_decode_arguments(parser)
    return parser


def test_help_lists_exactly_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    listed = re.findall(r"^    (\S+)", capsys.readouterr().out, flags=re.MULTILINE)
    assert listed == [command.name for command in cli.COMMANDS]


def test_every_command_module_is_listed_once() -> None:
    modules = sorted(p.stem.replace("_", "-") for p in COMMANDS_DIR.glob("*.py") if not p.stem.startswith("_"))
    names = [command.name for command in cli.COMMANDS]
    assert len(set(names)) == len(names)
    assert modules == sorted(names)  # a command module left out of COMMANDS would never run


def test_help_and_argument_errors_import_no_torch() -> None:
    """The top-level help, ``--version``, a mistyped command, every command's ``--help``, an
    argument error of every command and ``train`` without ``--config`` answer without importing
    torch, numpy or matplotlib (one process for all); so does ``python -m scg_summarize.cli prepare
    --help`` (the module's ``__main__`` block, run as ``-m`` runs it: `runpy.run_module`)."""
    code = (
        "import runpy, sys\nfrom scg_summarize.cli import COMMANDS, main\n"
        "codes = [main(['--help']), main(['--version']), main(['no-such-command'])]\n"
        "codes += [main([c.name, '--help']) for c in COMMANDS]\n"
        "codes += [main([c.name, '--no-such-option']) for c in COMMANDS]\n"
        "codes += [main(['train'])]\n"
        "sys.argv = ['scg_summarize.cli', 'prepare', '--help']\n"
        "try:\n    runpy.run_module('scg_summarize.cli', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as exit_:\n    codes.append(exit_.code)\n"
        "print(codes, sorted(m for m in ('torch', 'numpy', 'matplotlib') if m in sys.modules))\n"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    n = len(cli.COMMANDS)
    assert proc.stdout.strip().splitlines()[-1] == f"{[0, 0, 2] + [0] * n + [2] * n + [2, 0]} []", proc.stderr[-2000:]
    assert "usage: scg-summarize" in proc.stdout and "missing --config" in proc.stderr
    assert "--skip-bad" in proc.stdout and "--source-field" in proc.stdout  # prepare's help, from the __main__ block


def test_every_command_help_reads_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    """A ``%`` in a command's help shows as one ``%`` in the command list and in its own ``--help``."""
    assert cli.main(["--help"]) == 0
    for command in cli.COMMANDS:
        assert cli.main([command.name, "--help"]) == 0
    out = capsys.readouterr().out
    assert "%%" not in out and "Ext. % of" in out


def test_the_choices_are_the_implemented_names() -> None:
    """`scg_summarize.choices` (torch-free, read by the parsers) names exactly what the modules implement."""
    from scg_summarize.choices import BASELINES
    from scg_summarize.evaluation.baselines import get_baseline

    assert [get_baseline(name).method for name in BASELINES] == list(BASELINES)
    with pytest.raises(ValueError, match="unknown baseline"):
        get_baseline("no-such-baseline")


def test_every_field_has_a_flag_a_toml_key_and_help() -> None:
    parser = _parser()
    flags = {a.dest: a for a in parser._actions}
    for item in fields(DecodeOptions):
        setting = item.metadata["setting"]
        assert isinstance(setting, Setting) and setting.help and setting.expected, item.name
        action = flags[f"decode_{item.name}"]
        assert setting.flag in action.option_strings and action.help, item.name
        assert item.name in EvalConfig().to_table()  # the [eval] key is the field name
    assert set(PINNED) == {item.name for item in fields(DecodeOptions)}


@pytest.mark.parametrize("name", list(PINNED))
def test_a_run_and_a_flag_pin_each_field(name: str) -> None:
    value, argv = PINNED[name]
    text = {True: "true", False: "false"}.get(value) if isinstance(value, bool) else None
    toml = text or (repr(value) if isinstance(value, str) else str(list(value) if isinstance(value, tuple) else value))
    toml = toml.replace("'", '"')
    config = load_config("tiny-STANDARD", [f"eval.{name}={toml}"])
    assert getattr(config.eval.decode, name) == value
    table = Config.from_dict(config.to_dict()).eval.to_table()  # as config.json stores it
    run = DecodeOptions.from_eval_table(table)
    assert getattr(run, name) == value  # the run pins it: no flag given
    assert getattr(decode_options(_parser().parse_args([]), run), name) == value
    args = _parser().parse_args(argv)
    assert given_options(args) == {name: value}
    assert getattr(decode_options(args), name) == value  # the flag sets it over the defaults


def test_n_best_is_pinned_by_a_run_that_beams() -> None:
    run = load_config("C2F", ["eval.n_best=3"]).eval.decode
    assert decode_options(_parser().parse_args([]), run).n_best == 3
    assert decode_options(_parser().parse_args(["--n-best", "2"]), run).n_best == 2


def test_a_flag_overrides_the_run_and_min_len_follows_max_len() -> None:
    run = load_config("tiny-STANDARD").eval.decode  # greedy, 20 words (min_len 5: a quarter)
    assert (run.greedy, run.max_len, run.min_len) == (True, 20, 5)
    options = decode_options(_parser().parse_args(["--max-len", "40", "--beam", "3"]), run)
    assert (options.greedy, options.beam_size, options.max_len, options.min_len) == (False, 3, 40, 10)
    pinned = load_config("ABS").eval.decode  # min_len 1 set by the family: kept
    assert decode_options(_parser().parse_args(["--max-len", "30"]), pinned).min_len == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--length-penalty", "nan"], "argument --length-penalty: expected a finite number >= 0, got 'nan'"),
        (["--length-penalty", "inf"], "argument --length-penalty: expected a finite number >= 0, got 'inf'"),
        (["--beam", "0"], "argument --beam: expected an integer >= 1, got '0'"),
        (["--max-len", "2.5"], "argument --max-len: expected an integer >= 1, got '2.5'"),
        (["--no-repeat-ngram", "1"], "argument --no-repeat-ngram: expected 0 (off) or an integer >= 2, got '1'"),
        (["--n-best", "-2"], "argument --n-best: expected an integer >= 1, got '-2'"),
        (["--unk", "drop"], "argument --unk: expected one of 'allow', 'forbid', 'replace', got 'drop'"),
    ],
)
def test_bad_values_are_refused_naming_the_flag(argv: list[str], message: str) -> None:
    with pytest.raises(argparse.ArgumentError) as caught:
        _parser().parse_args(argv)
    assert str(caught.value).startswith(message)


def test_flags_that_do_not_fit_together_are_refused_naming_them() -> None:
    with pytest.raises(
        ValueError, match=r"--n-best: n_best: expected at most the summaries .* \(the beam size is 4\), got 5"
    ):
        decode_options(_parser().parse_args(["--n-best", "5"]))
    with pytest.raises(
        ValueError, match=r"n_best: .*\(greedy search keeps 1 summary\), got 3"
    ):  # (no beam size was set)
        decode_options(_parser().parse_args(["--n-best", "3", "--greedy"]))
    with pytest.raises(ValueError, match="min_len: expected at most max_len=8, got 9"):
        decode_options(_parser().parse_args(["--max-len", "8", "--min-len", "9"]))


def test_a_run_table_with_a_bad_value_is_refused_naming_the_key() -> None:
    with pytest.raises(ValueError, match=r"eval\.length_penalty: expected a finite number >= 0, got nan"):
        load_config("C2F", ["eval.length_penalty=nan"])
    with pytest.raises(
        ValueError, match=r"eval\.beam: unknown option; did you mean 'beam_size'\? \(known: beam_size, .*, batch_size"
    ):
        load_config("C2F", ["eval.beam=3"])  # the old key: the [eval] keys are the field names
    with pytest.raises(ValueError, match=r"eval\.length_penalty: expected a finite number >= 0, got inf"):
        DecodeOptions.from_eval_table({"length_penalty": float("inf"), "batch_size": 8})
    assert option_problems({"length_penalty": -1.0}) == ["length_penalty: expected a finite number >= 0, got -1.0"]
    with pytest.raises(ValueError, match=r"eval\.block_ngram: unknown option"):
        DecodeOptions.from_eval_table({"beam_size": 5, "block_ngram": 0})  # a run's table is never half read


def test_the_docs_list_every_flag_with_its_key() -> None:
    text = (Path(__file__).resolve().parents[3] / "docs" / "evaluation.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| `--")]
    for item in fields(DecodeOptions):
        flag = item.metadata["setting"].flag
        assert any(f"`{flag}" in row and f"`{item.name}`" in row for row in rows), (flag, item.name)
