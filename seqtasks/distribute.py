"""Builds the `tf.distribute` strategy a recipe's `distribute` section asks for."""

from seqtasks.errors import SeqtasksError


def make_strategy(config):
    import tensorflow as tf

    gpus = tf.config.list_logical_devices("GPU")
    if config.strategy == "auto":
        if len(gpus) > 1:
            return tf.distribute.MirroredStrategy()
        return tf.distribute.get_strategy()
    devices = [_check_device(name) for name in config.devices]
    if config.strategy == "one_device":
        default = gpus[0].name if gpus else "/cpu:0"
        return tf.distribute.OneDeviceStrategy(devices[0] if devices else default)
    return tf.distribute.MirroredStrategy(devices=devices or None)


def _check_device(name):
    import tensorflow as tf

    try:
        wanted = tf.DeviceSpec.from_string(name)
    except ValueError:
        raise SeqtasksError(f"distribute.devices: not a device name: {name!r}") from None
    visible = tf.config.list_logical_devices()
    for device in visible:
        spec = tf.DeviceSpec.from_string(device.name)
        if (wanted.device_type or "").upper() == spec.device_type and (
            wanted.device_index is None or wanted.device_index == spec.device_index
        ):
            return device.name
    names = ", ".join(device.name for device in visible)
    raise SeqtasksError(f"distribute.devices: no device {name!r}; visible devices: {names}")
