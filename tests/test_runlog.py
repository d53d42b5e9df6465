"""simrl.rl.runlog: the copy of the console a run keeps, and the progress line's means."""

import io
import sys

import pytest

from simrl.rl.runlog import mean_text, tee_output


def test_tee_copies_stdout_and_stderr_and_restores_them(tmp_path, monkeypatch):
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    log = tmp_path / "run" / "train.log"
    with tee_output(log):
        print("it     1/2")
        print("a warning", file=sys.stderr)
        kept = sys.stdout  # e.g. a logging handler made during the run
    assert sys.stdout is out and sys.stderr is err
    kept.write("after the run\n")  # the log is closed: the console alone, no error
    assert log.read_text() == "it     1/2\na warning\n"
    assert out.getvalue() == "it     1/2\nafter the run\n" and err.getvalue() == "a warning\n"


def test_tee_records_the_error_that_ended_the_run(tmp_path):
    with pytest.raises(SystemExit), tee_output(tmp_path / "a.log"):
        raise SystemExit("simrl: resume=x: no such checkpoint file or run directory")
    assert (tmp_path / "a.log").read_text() == "simrl: resume=x: no such checkpoint file or run directory\n"
    with pytest.raises(ZeroDivisionError), tee_output(tmp_path / "b.log"):
        print("before")
        1 / 0  # noqa: B018
    text = (tmp_path / "b.log").read_text()
    assert text.startswith("before\nTraceback (most recent call last):") and "ZeroDivisionError" in text


def test_mean_text_is_a_dash_until_there_is_a_mean():
    assert mean_text(float("nan"), 9, 3) == "        -"
    assert mean_text(23.25, 9, 3) == "   23.250"
    assert mean_text(float("nan"), 0, 2) == "-"
