"""A run under Keras' JAX backend stopped mid-epoch resumes as if never stopped.

Apart from `test_jax_training.py` so that the two long JAX runs land on different xdist workers.
"""

import json

import pytest

pytestmark = pytest.mark.slow  # two trainings in fresh processes, compiled by XLA


def test_a_jax_run_stopped_mid_epoch_resumes_as_the_uninterrupted_run(tmp_path, jax_env):
    from conftest import run_python
    from trained_runs import EXACT_RESUME, stop_and_resume_script, write_translation_for_resume

    script = stop_and_resume_script(tmp_path, [*EXACT_RESUME, *write_translation_for_resume(tmp_path)])
    result = run_python(script, env=jax_env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    histories = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(histories["uninterrupted"]["loss"]) == 2 and histories["epochs"] == 2
    assert histories["resumed"] == histories["uninterrupted"]
