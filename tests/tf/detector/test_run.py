"""`nanguard run` on TensorFlow programs: the detector is picked from the program's imports,
a finding exits 1 with the report on stderr and in --json, a clean program keeps its status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

EAGER_BACKWARD = textwrap.dedent("""\
    import sys
    import tensorflow as tf

    print("argv", sys.argv[1:], __name__)
    x = tf.Variable([0.0, 1.0, 4.0])
    with tf.GradientTape() as tape:
        y = tf.sqrt(x)              # the line the report must name
        loss = tf.reduce_sum(y)
    grad = tape.gradient(loss, x)
    print("not reached")
""")

# TensorFlow arrives through Keras and a helper module: no `import tensorflow` in the script
KERAS_FIT = textwrap.dedent("""\
    import numpy as np
    import helper

    model = helper.build()
    x = np.ones((4, 2), "float32")
    model.fit(x, np.zeros((4, 1), "float32"), epochs=1, verbose=0)
    print("trained")
""")
HELPER = textwrap.dedent("""\
    import keras

    def divide(x):
        return x / keras.ops.sum(x * 0.0, axis=-1, keepdims=True)   # 0 denominators

    def build():
        inp = keras.Input((2,))
        out = keras.layers.Dense(1)(keras.layers.Lambda(divide)(inp))
        model = keras.Model(inp, out)
        model.compile(optimizer="sgd", loss="mse")
        return model
""")


def _nanguard(*args, cwd):
    env = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1", TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run([sys.executable, "-m", "nanguard", "run", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=400)


@pytest.mark.slow
def test_tf_script_with_backward_inf_exits_1_with_report_and_json(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(EAGER_BACKWARD)
    done = _nanguard("--json", "out.json", "train.py", "--lr", "3", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "argv ['--lr', '3'] __main__" in done.stdout and "not reached" not in done.stdout
    assert "backward of Sqrt" in done.stderr and "train.py:7" in done.stderr
    data = json.loads((tmp_path / "out.json").read_text())
    assert data["found"] is True and (data["phase"], data["op"], data["forward_op"]) == ("backward", "SqrtGrad", "Sqrt")
    assert (data["file"], data["line"], data["call_line"]) == (str(script), 7, 9)
    assert data["inputs"] and "nanguard.tf.sqrt" in data["suggestion"]
    assert "torch" not in done.stderr


@pytest.mark.slow
def test_keras_fit_through_a_helper_module_is_detected_and_a_clean_run_keeps_its_status(tmp_path):
    (tmp_path / "helper.py").write_text(HELPER)
    (tmp_path / "fit.py").write_text(KERAS_FIT)
    done = _nanguard("--json", "r.json", "fit.py", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "trained" not in done.stdout
    data = json.loads((tmp_path / "r.json").read_text())
    assert (data["op"], data["file"], data["line"]) == ("RealDiv", str(tmp_path / "helper.py"), 4)
    (tmp_path / "clean.py").write_text("import sys\nimport tensorflow as tf\nprint(float(tf.sqrt(4.0)))\nsys.exit(3)\n")
    done = _nanguard("--json", "c.json", "clean.py", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert json.loads((tmp_path / "c.json").read_text())["found"] is False


def test_detector_choice_follows_the_imports():
    from nanguard.run.backends import frameworks_already_loaded, imported_names

    assert imported_names("import tensorflow as tf\nfrom torch import nn\nimport jax.numpy\n") == {
        "tensorflow", "torch", "jax"}
    assert imported_names("from . import x\nimport os\n") == {"os"}
    assert "tf" in frameworks_already_loaded("import keras\n")      # TensorFlow is loaded in this test process
    assert frameworks_already_loaded("import os\n") == []
