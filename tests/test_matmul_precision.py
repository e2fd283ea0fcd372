"""`training.matmul_precision`: set for the whole process by a run, and read back by the tests' tolerances."""

import numerics
import pytest
from numerics import tolerance

from seqtasks.lifecycle.backends import matmul_precision, set_matmul_precision

pytestmark = pytest.mark.backends


@pytest.fixture
def restore_precision():
    before = matmul_precision()
    yield
    set_matmul_precision(before)


def test_highest_is_set_for_the_process_and_read_back(restore_precision):
    set_matmul_precision("highest")
    assert matmul_precision() == "highest"
    set_matmul_precision("default")
    assert matmul_precision() == "default"


def test_the_backend_itself_holds_the_setting(restore_precision):
    import keras

    set_matmul_precision("highest")
    if keras.backend.backend() == "jax":
        import jax

        assert jax.config.jax_default_matmul_precision == "highest"
    else:
        import tensorflow as tf

        assert not tf.config.experimental.tensor_float_32_execution_enabled()


def test_a_run_sets_its_recipe_s_precision(restore_precision, tmp_path):
    from conftest import REPO

    from seqtasks.recipe import load_recipe
    from seqtasks.lifecycle.runner import Runner

    set_matmul_precision("default")
    Runner(load_recipe(REPO / "recipes" / "toy.yaml", ["training.matmul_precision=highest"]), tmp_path, log=None)
    assert matmul_precision() == "highest"


@pytest.mark.skipif("numerics.accelerated()")
def test_tolerances_are_float32_s_on_a_cpu_whatever_the_precision(restore_precision):
    for name in ("default", "highest"):
        set_matmul_precision(name)
        assert not numerics.tensorfloat32_in_force()
        assert tolerance(atol=1e-5) == {"atol": 1e-5, "rtol": 1e-7}


def test_tolerances_widen_only_where_tensorfloat32_is_in_force(monkeypatch):
    monkeypatch.setattr(numerics, "tensorfloat32_in_force", lambda: True)
    assert tolerance(atol=1e-5) == {"atol": 1e-2, "rtol": 1e-2}
    assert tolerance(atol=0.5, rtol=0.1) == {"atol": 0.5, "rtol": 0.1}


def test_an_unknown_precision_is_a_recipe_error():
    from conftest import REPO

    from seqtasks.errors import SeqtasksError
    from seqtasks.recipe import load_recipe

    with pytest.raises(SeqtasksError, match="training.matmul_precision.*expected one of default, highest"):
        load_recipe(REPO / "recipes" / "toy.yaml", ["training.matmul_precision=tf32"])
