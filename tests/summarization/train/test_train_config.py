"""Named configurations: every Table 1 row loads, variants and overrides, errors."""

from __future__ import annotations

import re

import pytest
from scg_summarize.train.config_loading import available_configs, load_config, parse_override

TABLE1 = [
    "STANDARD",
    "MODEL1",
    "HIER",
    "HIER-BOW",
    "HIER+POS",
    "HIER-5x80",
    "HIER-2x200",
    "C2F",
    "C2F+POS",
    "C2F+MULTI2",
    "C2F+POS+MULTI2",
    "C2F+MULTI3",
    "C2F+PRETRAIN",
    "C2F+ALTERNATE",
]


#: the model zoo's configurations beyond Table 1 (issue 14)
ZOO = ["PAULUS-ML", "PAULUS-RL", "PAULUS-ML+RL", "C2F+SCST", "ABS"]
ZOO += ["MAL-SEQ2SEQ", "MAL+SUATT", "MAL+UNATT", "MAL"]  # Li et al.'s Table 1 rows (issue 16)


def test_every_table1_row_has_a_named_config() -> None:
    assert sorted(available_configs()) == sorted(TABLE1 + ZOO)


def test_all_configs_and_variants_load() -> None:
    # one test over the 69 names, each failure named (a load costs ~1 ms; as 69 items, pytest's own ~4 ms
    # per item cost four times the loads)
    problems: dict[str, str] = {}
    for name in available_configs(include_variants=True):
        try:
            config = load_config(name)
        except Exception as err:
            problems[name] = f"{type(err).__name__}: {err}"
            continue
        if config.name != name or not config.description:
            problems[name] = f"name {config.name!r}, description {config.description!r}"
    assert not problems, problems


def test_table1_options_are_what_the_names_say() -> None:
    paper = {n: load_config(n) for n in TABLE1}
    assert paper["STANDARD"].model.attention == "standard" and paper["MODEL1"].model.attention == "model1"
    assert paper["HIER"].model.attention == "hier" and paper["HIER"].model.chunk_encoder == "conv"
    assert paper["HIER-BOW"].model.chunk_encoder == "bow"
    assert paper["HIER+POS"].model.pos and not paper["HIER"].model.pos
    assert paper["HIER-5x80"].data.regrid == [5, 80] and paper["HIER-2x200"].data.regrid == [2, 200]
    for name in TABLE1[7:]:
        assert paper[name].model.attention == "c2f"
    assert paper["C2F"].model.multi == 1 and paper["C2F+MULTI2"].model.multi == 2
    assert paper["C2F+MULTI3"].model.multi == 3
    assert paper["C2F+POS+MULTI2"].model.pos and paper["C2F+POS+MULTI2"].model.multi == 2
    assert paper["C2F+PRETRAIN"].train.pretrain and paper["C2F+ALTERNATE"].train.alternate == 0.5
    # the paper's sizes and optimization (Section 5)
    c = paper["C2F"]
    assert (c.model.hidden, c.model.enc_layers, c.model.dec_layers) == (500, 2, 2)
    assert (c.model.conv_width, c.model.conv_filters, c.model.pos_dim, c.model.dropout) == (6, 600, 25, 0.3)
    t = c.train
    assert (t.optimizer, t.lr, t.chunk_encoder_lr_scale, t.max_grad_norm) == ("sgd", 1.0, 0.1, 5.0)
    assert (c.train.lr_decay, c.train.discount, c.train.baseline_beta, c.train.reward_scale) == (0.5, 0.5, 0.1, 0.3)
    assert c.model.init_range == 0.1


def test_variants_shrink_the_model_only() -> None:
    big, small, tiny = load_config("C2F+MULTI2"), load_config("small-C2F+MULTI2"), load_config("tiny-C2F+MULTI2")
    assert small.model.hidden < big.model.hidden and tiny.model.hidden < small.model.hidden
    assert small.model.attention == tiny.model.attention == "c2f" and small.model.multi == 2


def test_copy_suffix_applies_to_any_name_and_overrides_still_win() -> None:
    config = load_config("small-C2F+MULTI2+COPY")
    assert config.model.copy and config.model.multi == 2 and config.model.hidden == 128
    assert config.name == "small-C2F+MULTI2+COPY"
    assert not load_config("small-C2F+MULTI2").model.copy
    assert not load_config("STANDARD+COPY", ["model.copy=false"]).model.copy
    with pytest.raises(ValueError, match="suffixes: \\+COPY"):
        load_config("+COPY")


def test_overrides() -> None:
    config = load_config(
        "small-STANDARD",
        ["model.hidden=64", "train.optimizer=sgd", "data.regrid=[4, 10]", "train.alternate=0.0", "eval.beam_size=3"],
    )
    assert config.model.hidden == 64 and config.train.optimizer == "sgd" and config.data.regrid == [4, 10]
    assert config.eval.decode.beam_size == 3
    assert parse_override("train.init_from=runs/x/best.pt") == (["train", "init_from"], "runs/x/best.pt")
    assert parse_override('train.optimizer="adam"') == (["train", "optimizer"], "adam")


@pytest.mark.parametrize(
    ("name", "overrides", "message"),
    [
        ("NOPE", [], "unknown configuration"),
        ("STANDARD", ["model.hiden=3"], "model.hiden: not an option of the .c2f. family"),
        ("STANDARD", ["model.attention=soft"], "model.attention"),
        ("STANDARD", ["model.multi=2"], "needs model.attention = 'c2f'"),
        ("HIER", ["train.alternate=0.5"], "ALTERNATE"),
        ("STANDARD", ["hidden=3"], "one dot"),
        ("STANDARD", ["train.discount=2.0"], "discount"),
    ],
)
def test_bad_configs_are_rejected(name: str, overrides: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_config(name, overrides)


def test_a_toml_file_can_extend_a_named_config(tmp_path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text('extends = "C2F"\n[model]\nmulti = 4\n')
    config = load_config(str(path))
    assert config.model.multi == 4 and config.model.attention == "c2f" and config.name == "mine"
    path.write_text('extends = "C2F-NOPE"\n')
    with pytest.raises(ValueError, match="extends"):
        load_config(str(path))


def test_a_toml_file_extends_any_name_load_config_takes_and_its_errors_name_it(tmp_path) -> None:
    """``extends = "tiny-C2F"`` was refused ("no named configuration 'tiny-C2F'") though --list and
    --config take it; ``extends = "x.toml"`` looked for x.toml.toml; a TOML error and an unknown
    table named no file (or left the eval table out of the known ones)."""
    (tmp_path / "x.toml").write_text('extends = "tiny-C2F+MULTI2"\n[model]\nhidden = 32\n')
    x = load_config(str(tmp_path / "x.toml"))
    tiny = load_config("tiny-C2F+MULTI2")
    assert (x.model.hidden, x.model.multi, x.model.emb_dim) == (32, 2, tiny.model.emb_dim)
    (tmp_path / "y.toml").write_text('extends = "x.toml"\n[train]\nlr = 0.5\n')
    y = load_config(str(tmp_path / "y.toml"))
    assert (y.model.hidden, y.train.lr) == (32, 0.5)
    (tmp_path / "dup.toml").write_text("[model]\nhidden = 3\nhidden = 4\n")
    with pytest.raises(ValueError, match=r"dup.toml: Cannot overwrite a value \(at line 3"):
        load_config(str(tmp_path / "dup.toml"))
    (tmp_path / "tab.toml").write_text("[bogus]\na = 1\n")
    with pytest.raises(ValueError, match=r"bogus: unknown configuration table \(known: data, eval, model, train\)"):
        load_config(str(tmp_path / "tab.toml"))


def test_a_configuration_file_that_is_missing_or_not_utf8_is_named(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A missing ``--config mine.toml`` (or a folder of that name) was answered with the list of named
    configurations (``unknown configuration 'mine.toml'; available: ABS, C2F, ...``); a file saved as
    UTF-16 (or any bytes that are not UTF-8), given or extended, failed with ``'utf-8' codec can't
    decode byte 0xff in position 0: invalid start byte`` and no file named."""
    missing = tmp_path / "mine.toml"
    with pytest.raises(ValueError, match=re.escape(f"{missing}: no such file; expected a configuration file (.toml)")):
        load_config(str(missing))
    (tmp_path / "folder.toml").mkdir()
    with pytest.raises(ValueError, match=r"folder.toml: a directory, not a file; expected a configuration file"):
        load_config(tmp_path / "folder.toml")
    (tmp_path / "utf16.toml").write_text("[model]\nhidden = 3\n", encoding="utf-16")
    (tmp_path / "child.toml").write_text('extends = "utf16"\n')
    for name in ("utf16.toml", "child.toml"):
        with pytest.raises(
            ValueError, match=r"utf16.toml: not UTF-8 text \(byte 0xff at offset 0\); expected a TOML file"
        ):
            load_config(tmp_path / name)


def test_a_config_that_looks_like_a_path_is_a_path_and_a_bare_name_a_named_configuration(  # type: ignore[no-untyped-def]
    tmp_path, monkeypatch
) -> None:
    """``--config ./C2F`` (missing) loaded the packaged ``C2F`` (``Path(configs, "./C2F.toml")``), and
    ``--config /elsewhere/C2F`` read ``/elsewhere/C2F.toml``: a string with a ``/`` or a ``.toml`` suffix
    is a path, read as a file or refused naming it; only a bare name selects a named configuration."""
    monkeypatch.chdir(tmp_path)
    for given in ("./C2F", "sub/C2F", str(tmp_path / "C2F"), "C2F.toml"):
        with pytest.raises(ValueError) as info:
            load_config(given)
        message = str(info.value)
        assert message.startswith(f"{given}: no such file; expected a configuration file (.toml) or the name of one")
        assert "give --config C2F" in message  # (the named configuration its file name names)
    (tmp_path / "C2F.toml").write_text('extends = "tiny-C2F"\n[model]\nhidden = 12\n')
    with pytest.raises(ValueError, match=r"C2F: no such file"):  # a path is taken as given (no .toml added)
        load_config(str(tmp_path / "C2F"))
    assert load_config("./C2F.toml").model.hidden == 12
    (tmp_path / "mine").write_text('extends = "tiny-C2F"\n[model]\nhidden = 12\n')
    assert load_config("./mine").model.hidden == 12  # a path with no .toml suffix is read as a file
    assert load_config("C2F").model.hidden != 12  # a bare name is the packaged one, beside a C2F.toml or not
    with pytest.raises(ValueError, match=re.escape("unknown configuration 'mine'; available: ")) as info:
        load_config("mine")
    assert str(info.value).endswith("for the file mine, give --config ./mine")
    (tmp_path / "child.toml").write_text('extends = "sub/C2F"\n')  # (extends: a file beside it, or a name)
    with pytest.raises(ValueError, match=r"child.toml: extends 'sub/C2F', but there is no .*sub/C2F.toml nor a named"):
        load_config("child.toml")


def test_load_config_takes_a_path_and_refuses_a_string_of_overrides(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A ``Path`` failed with ``'PosixPath' object has no attribute 'endswith'``; a string of
    overrides was read one character at a time."""
    path = tmp_path / "mine.toml"
    path.write_text('extends = "tiny-C2F"\n[model]\nhidden = 12\n')
    assert load_config(path).model.hidden == 12
    with pytest.raises(TypeError, match=r"overrides=...\): expected a list of TABLE.KEY=VALUE strings"):
        load_config("tiny-C2F", "model.hidden=32")  # type: ignore[arg-type]


def test_train_device_is_checked_by_the_one_device_check(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``train.device`` went to ``torch.device`` unchecked outside the TOML schema: a `TrainConfig`
    built in Python took ``'gpu'`` (``validate`` passed) and the `Trainer` failed inside torch
    (``Expected one of cpu, cuda, ipu, xpu, ...``), ``'cuda:x'`` with ``Invalid device string``, a
    GPU this machine lacks when the model moved; and the schema let ``'mps'`` through, which every
    other device entry point refuses. The form is checked by ``validate`` (a saved GPU run is still
    read on a CPU), the machine by the trainer (`devices.checked_device`)."""
    import torch
    from scg_summarize.train.config import TrainConfig
    from scg_summarize.train.ddp import resolve_device
    from scg_summarize.train.loop import Trainer

    expected = "'auto', 'cpu', 'cuda' or 'cuda:N'"
    for device in ("gpu", "cuda:x", "mps", "meta"):
        with pytest.raises(ValueError, match=rf"train.device must be {expected}, got '{device}'"):
            TrainConfig(device=device).validate()
        with pytest.raises(ValueError, match=rf"train.device = '{device}': expected {expected}"):
            resolve_device(device)
    with pytest.raises(ValueError, match=rf"train.device: expected {expected}, got 'mps'"):
        load_config("tiny-C2F", ["train.device='mps'"])
    TrainConfig(device="cuda:1").validate()  # the form only: a run trained on a GPU is read on a CPU
    absent = f"cuda:{torch.cuda.device_count()}"  # a GPU no machine has: one past the last
    with pytest.raises(
        ValueError, match=rf"train.device: '{absent}', but (no CUDA GPU is available here|this machine has)"
    ):
        resolve_device(absent)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"train.device: 'cuda', but no CUDA GPU is available here"):
            resolve_device("cuda")
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto") == (torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu"))
    config = load_config("tiny-C2F")
    config.train.device = absent  # (set after the checks of load_config: the trainer still looks)
    with pytest.raises(ValueError, match=rf"train.device: '{absent}', but"):
        Trainer(config, tmp_path / "no-corpus", tmp_path / "run", quiet=True, log=lambda line: None)


@pytest.mark.parametrize(
    ("table", "options", "message"),
    [
        ("train", {"cuda_graph": "false"}, "train.cuda_graph must be true or false, got 'false'"),  # (was true)
        ("train", {"pretrain": "no"}, "train.pretrain must be true or false, got 'no'"),  # (was true)
        ("train", {"lr": "0.1"}, "train.lr must be a finite number, got '0.1'"),  # ('<=' not supported ...)
        ("train", {"epochs": 2.5}, "train.epochs must be an integer, got 2.5"),  # (accepted)
        ("data", {"pad_targets": "8"}, "data.pad_targets must be an integer, got '8'"),  # (accepted)
        ("eval", {"batch_size": True}, "eval.batch_size must be an integer, got True"),  # (accepted)
    ],
)
def test_a_config_built_in_python_is_type_checked_and_the_trainer_validates_it(
    table: str, options: dict[str, object], message: str, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    """The ``[train]``, ``[data]`` and ``[eval]`` dataclasses built in Python were not type-checked
    (``model`` is: `check_field_types`), and the `Trainer` did not validate the `Config` it was
    given, so ``TrainConfig(cuda_graph="false")`` trained with CUDA graphs asked for."""
    from scg_summarize.train.config import Config, DataConfig, EvalConfig, TrainConfig
    from scg_summarize.train.loop import Trainer

    kinds = {"train": TrainConfig, "data": DataConfig, "eval": EvalConfig}
    part = kinds[table](**options)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=re.escape(message)):
        part.validate()
    config = Config(**{table: part})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=re.escape(message)):
        Trainer(config, tmp_path / "corpus", tmp_path / "run", quiet=True, log=lambda line: None)
    assert not (tmp_path / "run").exists()


def test_the_trainer_names_a_config_of_the_wrong_kind(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A configuration name given for the `Config` failed with ``'str' object has no attribute 'train'``."""
    from scg_summarize.train.loop import Trainer

    with pytest.raises(TypeError, match=r"Trainer\(config\): expected a Config \(load_config\), got str"):
        Trainer("tiny-C2F", tmp_path / "corpus", tmp_path / "run")  # type: ignore[arg-type]
