import pytest

from seqtasks.distribute import make_strategy
from seqtasks.errors import SeqtasksError
from seqtasks.recipe.schema import DistributeConfig


def test_auto_on_a_machine_without_gpus_is_the_default_strategy():
    import tensorflow as tf

    if tf.config.list_logical_devices("GPU"):
        pytest.skip("this machine has a GPU")
    strategy = make_strategy(DistributeConfig())
    assert strategy is tf.distribute.get_strategy()
    assert strategy.num_replicas_in_sync == 1


def test_one_device_uses_the_named_device():
    strategy = make_strategy(DistributeConfig(strategy="one_device", devices=["/cpu:0"]))
    assert strategy.num_replicas_in_sync == 1
    assert strategy.extended.worker_devices[0].endswith("CPU:0")


@pytest.mark.parametrize(
    "devices, message",
    [(["/gpu:7"], "no device '/gpu:7'; visible devices: "), (["gpu 0"], "not a device name: 'gpu 0'")],
)
def test_unknown_devices_are_clear_errors(devices, message):
    with pytest.raises(SeqtasksError, match=message):
        make_strategy(DistributeConfig(strategy="mirrored", devices=devices))


def test_mirrored_over_two_logical_cpus(fresh_python):
    result = fresh_python(
        """
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from seqtasks.distribute import make_strategy
from seqtasks.recipe.schema import DistributeConfig
strategy = make_strategy(DistributeConfig(strategy="mirrored", devices=["/cpu:0", "/cpu:1"]))
assert strategy.num_replicas_in_sync == 2, strategy.num_replicas_in_sync
print("replicas", strategy.num_replicas_in_sync)
"""
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "replicas 2" in result.stdout
