"""The scoring core's command line on a researcher's slips: a message naming what is wrong, never a traceback."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evaluation_workers.cli import main
from evaluation_workers.synthetic import mmscan_vg as synthetic_mmscan

REPO = Path(__file__).parents[2]


@pytest.fixture
def mmscan_files(tmp_path: Path) -> dict[str, Path]:
    labels, predictions = synthetic_mmscan.make_data(samples=20, seed=3)
    files = {"labels": tmp_path / "labels.json", "predictions": tmp_path / "predictions.json"}
    files["labels"].write_text(json.dumps(labels))
    files["predictions"].write_text(json.dumps(predictions))
    return files


@pytest.mark.parametrize("missing", ["labels", "predictions"])
def test_a_path_that_does_not_exist_is_named(mmscan_files, tmp_path, capsys, missing):
    paths = {**mmscan_files, missing: tmp_path / "nope" / "x.json"}
    code = main(["score", "--quiet", "--track", "mmscan-vg", "--labels", str(paths["labels"]),
                 "--predictions", str(paths["predictions"])])
    err = capsys.readouterr().err
    assert code == 1
    assert err == f"error: --{missing} {paths[missing]}: no such file or folder\n"


def test_a_folder_given_as_the_predictions_is_named(mmscan_files, tmp_path, capsys):
    code = main(["score", "--quiet", "--track", "mmscan-vg", "--labels", str(mmscan_files["labels"]),
                 "--predictions", str(tmp_path)])
    assert code == 1
    assert capsys.readouterr().err == f"error: --predictions {tmp_path}: Expected a file, but got a folder\n"


def test_an_output_in_a_folder_that_does_not_exist_is_named_before_scoring(mmscan_files, tmp_path, capsys):
    output = tmp_path / "results" / "r.json"
    code = main(["score", "--quiet", "--track", "mmscan-vg", "--labels", str(mmscan_files["labels"]),
                 "--predictions", str(mmscan_files["predictions"]), "--output", str(output)])
    captured = capsys.readouterr()
    assert code == 1 and captured.out == ""
    assert captured.err == f"error: --output {output}: no folder {output.parent} to write it in\n"


def test_convert_names_a_missing_input_and_a_missing_output_folder(tmp_path, capsys):
    results = tmp_path / "results.json"
    results.write_text("[]")
    base = ["convert", "--track", "sqa3d", "--from", "leo"]
    assert main([*base, "--questions", str(tmp_path / "q.json"), str(results), str(tmp_path / "out.json")]) == 1
    assert capsys.readouterr().err == f"error: --questions {tmp_path / 'q.json'}: no such file or folder\n"
    assert main([*base, str(results), str(tmp_path / "no" / "out.json")]) == 1
    assert capsys.readouterr().err == f"error: OUT {tmp_path / 'no' / 'out.json'}: no folder {tmp_path / 'no'} to write it in\n"


def test_labels_the_scorer_cannot_read_are_an_error_message(mmscan_files, tmp_path, capsys):
    folder = tmp_path / "two"
    folder.mkdir()
    for name in ("a.json", "b.json"):
        (folder / name).write_text("[]")
    code = main(["score", "--quiet", "--track", "mmscan-vg", "--labels", str(folder),
                 "--predictions", str(mmscan_files["predictions"])])
    assert code == 1
    assert capsys.readouterr().err == f"error: labels: Expected one labels .json file in {folder}, but found 2\n"


def test_an_openscan_labels_folder_without_its_vocabulary_is_named(tmp_path, capsys):
    labels = tmp_path / "labels"
    labels.mkdir()
    predictions = tmp_path / "predictions.zip"
    predictions.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip: the labels are read first
    code = main(["score", "--quiet", "--track", "openscan", "--labels", str(labels),
                 "--predictions", str(predictions)])
    assert code == 1
    assert capsys.readouterr().err == (f"error: labels: {labels}: Expected a labels folder holding vocabulary.json "
                                       "and gt/, but it has no vocabulary.json\n")


def test_the_module_exits_1_without_a_traceback(mmscan_files, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "evaluation_workers", "score", "--track", "mmscan-vg",
                           "--labels", str(mmscan_files["labels"]), "--predictions", str(tmp_path / "p.json")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr == f"error: --predictions {tmp_path / 'p.json'}: no such file or folder\n"
    assert done.stdout == ""


def test_a_reader_that_goes_away_ends_the_command_quietly(mmscan_files):
    """``python -m evaluation_workers score ... | head`` ended in a BrokenPipe traceback (issue 27)."""
    proc = subprocess.Popen([sys.executable, "-m", "evaluation_workers", "score", "--quiet", "--track", "mmscan-vg",
                             "--labels", str(mmscan_files["labels"]), "--predictions", str(mmscan_files["predictions"])],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # as head does once it has its lines
    err = proc.stderr.read().decode()
    assert (proc.wait(timeout=120), err) == (141, "")


def test_the_scoring_command_lines_help_is_plain_without_markup() -> None:
    """The module docstring is reStructuredText for readers of the code; its help shows no backticks."""
    from evaluation_workers.cli import _parser

    parser = _parser()
    texts = [parser.format_help()] + [sub.format_help() for action in parser._actions
                                      if isinstance(action, argparse._SubParsersAction)
                                      for sub in action.choices.values()]
    assert len(texts) > 5 and not [line for text in texts for line in text.splitlines() if "`" in line]
