"""A NaN made in a DataLoader worker keeps its report in the main process (issue 14).

PyTorch re-raises a worker's exception in the main process from its type and text only, so
the report used to be lost: ``nanguard run --json`` said ``"found": false`` for a run that
exited 1 on a NaN.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

import nanguard
from nanguard.errors import NonFiniteError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DATA_LINE = 11   # the line of ``x / x`` in the program below and in `ZeroOverZero`

PROGRAM = textwrap.dedent("""\
    import torch
    from torch.utils.data import DataLoader, Dataset


    class ZeroOverZero(Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            x = torch.zeros(3)
            return x / x


    if __name__ == "__main__":
        for batch in DataLoader(ZeroOverZero(), batch_size=2, num_workers=2):
            print("batch", batch.shape)
""")


class ZeroOverZero(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        x = torch.zeros(3)
        y = torch.ones(3)
        return x / x + y


def test_report_and_error_survive_pickling():
    with nanguard.detect(mode="record") as d:
        torch.zeros(2) / torch.zeros(2)
    err = NonFiniteError(d.report.format(color=False), d.report)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is NonFiniteError and str(back) == str(err)
    assert back.report == d.report and back.report.to_dict() == d.report.to_dict()


@pytest.mark.slow
def test_worker_nan_reaches_the_main_process_detection():
    loader = DataLoader(ZeroOverZero(), batch_size=2, num_workers=2, multiprocessing_context="fork")
    with pytest.raises(NonFiniteError) as info:
        with nanguard.detect() as d:
            for _ in loader:
                pass
    report = info.value.report
    assert report is not None and report is d.report
    assert (report.op, report.kind, report.phase) == ("aten.div.Tensor", "nan", "forward")
    assert report.file == os.path.abspath(__file__) and report.function == "__getitem__"
    assert report.code == "return x / x + y"
    assert any("DataLoader worker process" in note for note in report.notes)


@pytest.mark.slow
def test_nanguard_run_json_says_found_for_a_worker_nan(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(PROGRAM)
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")
    done = subprocess.run([sys.executable, "-m", "nanguard", "run", "--json", "out.json", "train.py"],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=240)
    assert done.returncode == 1, done.stderr[-2000:]
    assert f"train.py:{DATA_LINE} in __getitem__" in done.stderr
    assert "Traceback" not in done.stderr          # the report, not the worker's traceback
    data = json.loads((tmp_path / "out.json").read_text())
    assert data["found"] is True and data["kind"] == "nan" and data["op"] == "aten.div.Tensor"
    assert (data["file"], data["line"], data["function"]) == (str(script), DATA_LINE, "__getitem__")
    assert data["code"] == "return x / x"
