"""Faults in a subprocess (issue 13): SIGTERM/SIGINT stop gracefully with nothing lost, a second
signal exits at once, workers stop when the torchrun agent dies, and one run directory or
corpus directory has one writer at a time (the second is refused naming the holder's pid)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from scg_summarize.models.loading import read_checkpoint

from ..conftest import ShortRun
from ..robust_support import cli, same_parameters, start, train_args, train_lines, wait_for


# end to end in subprocesses; the same logic in process (default suite):
# test_sigterm_in_process_stops_after_the_step_with_a_checkpoint_and_resumes_bitwise
@pytest.mark.slow
def test_sigterm_stops_after_the_step_with_a_checkpoint_and_resumes_bitwise(
    synthetic_corpus: Path, tmp_path: Path
) -> None:
    # no periodic checkpoints: without the graceful stop, every step of the epoch would be lost
    reference = start(*train_args(synthetic_corpus, tmp_path / "reference"))
    victim = start(*train_args(synthetic_corpus, tmp_path / "victim", "--set", "train.throttle_s=0.3"))
    wait_for(lambda: train_lines(tmp_path / "victim") >= 3, victim)
    victim.send_signal(signal.SIGTERM)
    output = victim.communicate(timeout=120)[0].decode()
    assert victim.returncode == 128 + signal.SIGTERM, output
    assert "Traceback" not in output
    stopped = [line for line in output.splitlines() if "stopped by SIGTERM at step" in line]
    assert len(stopped) == 1, output  # one line says where the run stopped
    step = int(read_checkpoint(tmp_path / "victim" / "checkpoint.pt")["step"])
    assert f"at step {step};" in stopped[-1] and step % 8 != 0  # mid-epoch, and nothing after it lost
    assert train_lines(tmp_path / "victim") == step  # log_every=1: one line per step, none beyond
    assert reference.wait(timeout=240) == 0
    resumed = cli(*train_args(synthetic_corpus, tmp_path / "victim", "--resume"))
    assert resumed.returncode == 0, resumed.stderr
    assert same_parameters(tmp_path / "reference" / "checkpoint.pt", tmp_path / "victim" / "checkpoint.pt")
    assert same_parameters(tmp_path / "reference" / "best.pt", tmp_path / "victim" / "best.pt")


# the second signal's exit is checked in process by test_stop_request_flags_one_signal_exits_on_the_second
@pytest.mark.slow
def test_a_second_sigint_exits_at_once(synthetic_corpus: Path, tmp_path: Path) -> None:
    # each step sleeps 20 s: the first SIGINT asks to stop after it, the second must not wait
    proc = start(*train_args(synthetic_corpus, tmp_path / "run", "--set", "train.throttle_s=20"))
    wait_for(lambda: train_lines(tmp_path / "run") >= 1, proc)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    sent = time.time()
    proc.send_signal(signal.SIGINT)
    output = proc.communicate(timeout=15)[0].decode()
    assert time.time() - sent < 10
    assert proc.returncode == 128 + signal.SIGINT, output
    assert "second SIGINT: exiting now" in output and "Traceback" not in output
    assert not list((tmp_path / "run").glob("*.tmp"))


# the parent-death watch is checked in process by test_stop_request_notices_that_the_torchrun_agent_died
@pytest.mark.slow
def test_workers_stop_when_the_torchrun_agent_dies(
    synthetic_corpus: Path, tmp_path: Path, torchrun_env: dict[str, str]
) -> None:
    out = tmp_path / "ddp"
    log = tmp_path / "torchrun.log"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "scg_summarize.cli",
        "train",
        "--config",
        "tiny-C2F+MULTI2",
        "--data",
        str(synthetic_corpus),
        "--out",
        str(out),
        "--quiet",
        "--no-test",
        "--set",
        "train.epochs=50",
        "--set",
        "train.throttle_s=0.2",
        "--set",
        "train.log_every=1",
        "--set",
        "train.device='cpu'",
    ]
    with log.open("wb") as sink:
        agent = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, env=torchrun_env, cwd=tmp_path)
    wait_for(lambda: train_lines(out) >= 2, agent, timeout=240)
    workers = [
        int(p) for p in subprocess.run(["pgrep", "-P", str(agent.pid)], capture_output=True, text=True).stdout.split()
    ]
    assert len(workers) == 2, workers
    agent.kill()  # SIGKILL: the agent cannot forward anything to its workers
    agent.wait()

    def gone(pid: int) -> bool:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        return state in ("Z", "X")

    wait_for(lambda: all(gone(pid) for pid in workers), timeout=60)
    text = log.read_text(errors="replace")
    assert "torchrun agent" in text and "Traceback" not in text, text[-3000:]
    step = int(read_checkpoint(out / "checkpoint.pt")["step"])
    assert step >= 2  # the workers checkpointed the step they stopped after
    lines = train_lines(out)
    time.sleep(1.0)
    assert train_lines(out) == lines  # nobody is writing the run folder any more


# the refusal and the freed directory are checked in process by
# test_train_into_a_held_run_directory_is_refused_in_process_and_runs_once_free
@pytest.mark.slow
def test_a_second_train_on_one_run_directory_is_refused_naming_the_holder(
    synthetic_corpus: Path, tmp_path: Path
) -> None:
    first = start(*train_args(synthetic_corpus, tmp_path / "run", "--set", "train.throttle_s=3"))
    wait_for(lambda: train_lines(tmp_path / "run") >= 1, first)
    second = cli(*train_args(synthetic_corpus, tmp_path / "run"))
    assert second.returncode == 2
    assert f"is in use by scg-summarize train (pid {first.pid})" in second.stderr, second.stderr
    assert "Traceback" not in second.stderr
    first.send_signal(signal.SIGTERM)
    first.communicate(timeout=120)
    # the first run's log is its own (no interleaved second run): steps 1, 2, ... in order
    steps = [
        int(line.split('"step": ')[1].split(",")[0])
        for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    ]
    assert steps == list(range(1, len(steps) + 1))
    # once the holder is gone, the directory is free again (a holder that stops removes its .lock)
    assert not (tmp_path / "run" / ".lock").exists()
    assert cli(*train_args(synthetic_corpus, tmp_path / "run", "--resume")).returncode == 0


def test_prepare_into_a_locked_directory_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the lock's holder is another process (the property: a lock across processes); the refused
    # command runs in this process, as does the one that succeeds once the holder is gone
    from scg_summarize.cli import main

    out, role = tmp_path / "corpus", "prepare"
    prepare = [
        "prepare",
        "--format",
        "synthetic",
        "--output",
        str(out),
        "--n-train",
        "20",
        "--n-valid",
        "4",
        "--n-test",
        "4",
        "--quiet",
    ]
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from scg_summarize.dirlock import DirLock; "
            f"lock = DirLock(sys.argv[1], 'scg-summarize {role}').acquire(); "
            "print('held', flush=True); time.sleep(120)",
            str(out),
        ],
        stdout=subprocess.PIPE,
        env=os.environ.copy(),
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        assert main(prepare) == 2
        assert f"is in use by scg-summarize {role} (pid {holder.pid})" in capsys.readouterr().err
        assert not (out / "meta.json").exists()
    finally:
        holder.kill()
        holder.wait()
    # once the holder is gone the same command succeeds
    assert main(prepare) == 0
    assert (out / "meta.json").is_file()


def test_sigterm_during_the_final_test_evaluation_says_so_in_one_line(
    synthetic_corpus: Path, tmp_path: Path, monkeypatch, capsys
) -> None:  # type: ignore[no-untyped-def]
    # training is complete and written when the test evaluation starts: a signal there abandons
    # only the evaluation, with a one-line message and 128 + signal (before: silent death)
    import scg_summarize.commands.train as train_command
    from scg_summarize.cli import main

    def evaluation_hit_by_sigterm(*args: object, **kwargs: object) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises before this ends
        raise AssertionError("SIGTERM did not interrupt the evaluation")

    monkeypatch.setattr(train_command, "evaluate_test", evaluation_hit_by_sigterm)
    short = ("--set", "train.max_steps_per_epoch=1", "--set", "train.epochs=1")  # what is trained does not matter
    args = [a for a in train_args(synthetic_corpus, tmp_path / "run", *short) if a != "--no-test"]
    previous = signal.getsignal(signal.SIGTERM)
    assert main(args) == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is previous  # the handlers are put back
    err = [line for line in capsys.readouterr().err.splitlines() if "during the final test evaluation" in line]
    assert len(err) == 1 and "SIGTERM" in err[0] and "scg-summarize evaluate --run" in err[0]
    assert read_checkpoint(tmp_path / "run" / "best.pt")["step"] > 0  # training's results are kept


def test_sigterm_in_process_stops_after_the_step_with_a_checkpoint_and_resumes_bitwise(
    synthetic_corpus: Path, finished_short_run: ShortRun, tmp_path: Path, monkeypatch, capsys
) -> None:  # type: ignore[no-untyped-def]
    # SIGTERM to this process during step 3 (the trainer's own handler catches it): the run stops
    # after that step with a checkpoint, and resuming it ends bitwise where an unstopped run ends
    from scg_summarize.cli import main
    from scg_summarize.train.loop import Trainer

    reference, options = finished_short_run.path, finished_short_run.options  # the same run, not stopped
    previous = signal.getsignal(signal.SIGTERM)
    real_step = Trainer.train_step

    def step_hit_by_sigterm(self, batch):  # type: ignore[no-untyped-def]
        result = real_step(self, batch)
        if self.counters.step == 3:
            os.kill(os.getpid(), signal.SIGTERM)
        return result

    monkeypatch.setattr(Trainer, "train_step", step_hit_by_sigterm)
    capsys.readouterr()
    assert main(train_args(synthetic_corpus, tmp_path / "victim", *options)) == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is previous  # the handlers are put back
    err = capsys.readouterr().err
    assert "Traceback" not in err
    stopped = [line for line in err.splitlines() if "stopped by SIGTERM at step" in line]
    assert len(stopped) == 1, err
    assert int(read_checkpoint(tmp_path / "victim" / "checkpoint.pt")["step"]) == 3  # mid-epoch (2 steps)
    assert "at step 3;" in stopped[0]
    assert train_lines(tmp_path / "victim") == 3  # log_every=1: one line per step, none beyond
    monkeypatch.setattr(Trainer, "train_step", real_step)
    assert main(train_args(synthetic_corpus, tmp_path / "victim", *options, "--resume")) == 0
    assert same_parameters(reference / "checkpoint.pt", tmp_path / "victim" / "checkpoint.pt")
    assert same_parameters(reference / "best.pt", tmp_path / "victim" / "best.pt")


def test_stop_request_flags_one_signal_exits_on_the_second(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    from scg_summarize.train.signals import StopRequest

    exits: list[int] = []

    class Exited(Exception):
        pass

    def fake_exit(status: int) -> None:
        exits.append(status)
        raise Exited

    monkeypatch.setattr(os, "_exit", fake_exit)
    previous = signal.getsignal(signal.SIGINT)
    stop = StopRequest().install()
    try:
        assert not stop.requested()
        os.kill(os.getpid(), signal.SIGINT)  # the first: a flag, nothing exits
        assert stop.requested() and stop.status == 128 + signal.SIGINT and exits == []
        with pytest.raises(Exited):
            os.kill(os.getpid(), signal.SIGINT)  # the second: exits at once
        assert exits == [128 + signal.SIGINT]
    finally:
        stop.restore()
    assert signal.getsignal(signal.SIGINT) is previous
    err = capsys.readouterr().err
    assert "SIGINT received: stopping after this step" in err
    assert "second SIGINT: exiting now" in err and "Traceback" not in err


def test_stop_request_notices_that_the_torchrun_agent_died(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from scg_summarize.train.signals import StopRequest

    watched, unwatched = StopRequest(watch_parent=True), StopRequest()
    agent = os.getppid()
    assert not watched.requested() and not unwatched.requested()
    adopter = 1 if agent != 1 else agent + 1  # pytest itself may run re-parented to pid 1
    monkeypatch.setattr(os, "getppid", lambda: adopter)  # re-parented: the agent is gone
    assert not unwatched.requested()  # outside torchrun the parent is not watched
    assert watched.requested() and watched.status == 128 + signal.SIGTERM
    assert watched.reason == f"the death of the torchrun agent (pid {agent})"


def test_train_into_a_held_run_directory_is_refused_in_process_and_runs_once_free(
    synthetic_corpus: Path, tmp_path: Path, capsys
) -> None:  # type: ignore[no-untyped-def]
    from scg_summarize.cli import main
    from scg_summarize.dirlock import DirLock

    run = tmp_path / "run"
    run.mkdir()
    lock = DirLock(run, "scg-summarize train").acquire()
    try:
        assert (
            main(train_args(synthetic_corpus, run, "--set", "train.epochs=1", "--set", "train.max_steps_per_epoch=2"))
            == 2
        )
        err = capsys.readouterr().err
        assert f"is in use by scg-summarize train (pid {os.getpid()})" in err, err
        assert "Traceback" not in err
        assert not (run / "metrics.jsonl").exists()  # the refused run wrote nothing
    finally:
        lock.release()
    assert not (run / ".lock").exists()  # a holder that stops removes its .lock: the directory is free
    assert (
        main(train_args(synthetic_corpus, run, "--set", "train.epochs=1", "--set", "train.max_steps_per_epoch=2")) == 0
    )
    steps = [
        int(line.split('"step": ')[1].split(",")[0])
        for line in (run / "metrics.jsonl").read_text().splitlines()
        if '"event": "train"' in line
    ]
    assert steps == [1, 2]
