"""Builds the `tf.distribute` strategy a recipe's `distribute` section asks for.

A run makes its strategy once, before any other TensorFlow work (multi-worker
collectives must be configured at program start), and every later call with
the same settings returns that strategy.
"""

import json
import os

from seqtasks.errors import SeqtasksError

_STRATEGIES = {}


def cluster_workers(environ=None):
    """How many workers (the chief included) `TF_CONFIG` names; 0 without `TF_CONFIG`."""
    text = (os.environ if environ is None else environ).get("TF_CONFIG", "")
    if not text.strip():
        return 0
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise SeqtasksError(f"TF_CONFIG: not valid JSON: {error.msg} (character {error.pos + 1})") from None
    cluster = config.get("cluster") if isinstance(config, dict) else None
    if not isinstance(cluster, dict):
        raise SeqtasksError("TF_CONFIG: expected a JSON object with a 'cluster' mapping of roles to addresses")
    return sum(len(cluster.get(role) or []) for role in ("chief", "worker"))


def is_chief(environ=None):
    """Whether this process writes a multi-worker run's results: the `chief`, or worker 0 when there is none."""
    text = (os.environ if environ is None else environ).get("TF_CONFIG", "")
    if cluster_workers(environ) <= 1:
        return True
    config = json.loads(text)
    task = config.get("task") or {}
    if "chief" in config["cluster"]:
        return task.get("type") == "chief"
    return task.get("type") == "worker" and task.get("index", 0) == 0


def worker_name(environ=None):
    """This process's role in a `TF_CONFIG` cluster, like `worker:1`; empty outside a cluster."""
    if cluster_workers(environ) <= 1:
        return ""
    task = json.loads((os.environ if environ is None else environ)["TF_CONFIG"]).get("task") or {}
    return f"{task.get('type', 'worker')}:{task.get('index', 0)}"


def choose_strategy(strategy, gpus, workers, tpu):
    """The strategy `auto` means here: `tpu`, `multi_worker`, `mirrored` or `default`; others as asked."""
    if strategy != "auto":
        return strategy
    if tpu:
        return "tpu"
    if workers > 1:
        return "multi_worker"
    if gpus > 1:
        return "mirrored"
    return "default"


def _tpu_visible():
    import tensorflow as tf

    # Only local signs: probing for a TPU through the network could hang where there is none.
    return bool(os.environ.get("TPU_NAME") or tf.config.list_physical_devices("TPU"))


def make_strategy(config, backend="tensorflow"):
    """The strategy of a `DistributeConfig`, made once per process, backend and settings.

    Under JAX it is a `JaxDistribution`: Keras' own distribution API in
    place of `tf.distribute`.
    """
    key = (backend, config.strategy, tuple(config.devices), config.tpu)
    if key not in _STRATEGIES:
        _STRATEGIES[key] = _build(config) if backend == "tensorflow" else _jax_distribution(config)
    return _STRATEGIES[key]


class JaxDistribution:
    """A Keras `DataParallel` distribution (or none: one device) with a strategy's `scope()` and replica count."""

    def __init__(self, distribution=None):
        self.distribution = distribution
        self.num_replicas_in_sync = 1 if distribution is None else len(distribution.device_mesh.devices.flat)

    def scope(self):
        import contextlib

        return contextlib.nullcontext() if self.distribution is None else self.distribution.scope()


def _jax_distribution(config):
    """`DataParallel` over the devices the settings name (all of them for `mirrored` and `multi_worker`,
    and for `auto` when there are several); none for `default` and for `auto` on one device.

    `multi_worker` joins the processes that `KERAS_DISTRIBUTION_JOB_ADDRESSES`,
    `KERAS_DISTRIBUTION_NUM_PROCESSES` and `KERAS_DISTRIBUTION_PROCESS_ID`
    describe (`keras.distribution.initialize`, over `jax.distributed`).
    """
    import jax
    from keras import distribution

    if config.strategy == "tpu":
        raise SeqtasksError(
            "distribute.strategy: 'tpu' is TensorFlow's TPUStrategy; under JAX a TPU's cores are devices: "
            "use 'auto' or 'mirrored'"
        )
    if config.strategy == "multi_worker":
        if config.devices:
            raise SeqtasksError("distribute.devices: not used by 'multi_worker'; each process uses its own devices")
        if jax.process_count() == 1 and os.environ.get("KERAS_DISTRIBUTION_JOB_ADDRESSES"):
            distribution.initialize()
        if jax.process_count() == 1:
            raise SeqtasksError(
                "distribute.strategy: 'multi_worker' under JAX needs one process per host, joined by "
                "keras.distribution.initialize(): set KERAS_DISTRIBUTION_JOB_ADDRESSES, "
                "KERAS_DISTRIBUTION_NUM_PROCESSES and KERAS_DISTRIBUTION_PROCESS_ID (see docs/backends.md)"
            )
    available = distribution.list_devices()
    devices = [_jax_device(name, available) for name in config.devices]
    if config.strategy == "default" or (config.strategy == "auto" and len(available) == 1):
        return JaxDistribution()
    if config.strategy == "one_device":
        return JaxDistribution(distribution.DataParallel(devices=devices[:1] or available[:1]))
    return JaxDistribution(distribution.DataParallel(devices=devices or available))


def _jax_device(name, available):
    """Keras' name (`gpu:1`) of the JAX device a TensorFlow-style name (`/gpu:1`, `/device:GPU:1`) means."""
    import tensorflow as tf

    try:
        wanted = tf.DeviceSpec.from_string(name)
    except ValueError:
        raise SeqtasksError(f"distribute.devices: not a device name: {name!r}") from None
    found = f"{(wanted.device_type or '').lower()}:{wanted.device_index or 0}"
    if found not in available:
        raise SeqtasksError(f"distribute.devices: no device {name!r} under JAX; its devices: {', '.join(available)}")
    return found


def _build(config):
    import tensorflow as tf

    # Physical devices: listing logical ones would start the runtime before the collectives are set up.
    gpus = tf.config.list_physical_devices("GPU")
    tpu = config.strategy == "auto" and _tpu_visible()
    name = choose_strategy(config.strategy, len(gpus), cluster_workers(), tpu)
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "tpu":
        return _tpu_strategy(config.tpu)
    if name == "multi_worker":
        if config.devices:
            raise SeqtasksError("distribute.devices: not used by 'multi_worker'; each worker uses its own GPUs")
        return tf.distribute.MultiWorkerMirroredStrategy()
    devices = [_check_device(device) for device in config.devices]
    if name == "one_device":
        default = "/gpu:0" if gpus else "/cpu:0"
        return tf.distribute.OneDeviceStrategy(devices[0] if devices else default)
    return tf.distribute.MirroredStrategy(devices=devices or None)


def _tpu_strategy(address):
    import tensorflow as tf

    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=address or None)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, tf.errors.OpError) as error:
        where = f"at {address!r}" if address else "(distribute.tpu is empty: the local one)"
        raise SeqtasksError(f"distribute.strategy: no TPU {where}: {error}") from None
    return tf.distribute.TPUStrategy(resolver)


def replicas_in_step():
    """How many replicas run the step being traced: 1 outside a `tf.distribute` step and under other backends."""
    import keras

    if keras.backend.backend() != "tensorflow":
        return 1
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    return 1 if context is None else context.num_replicas_in_sync


def mean_over_replicas(value):
    """`value` averaged over the replicas of the `tf.distribute` step being traced (all replicas get the mean)."""
    import tensorflow as tf

    return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.MEAN, value)


class StepReplicas:
    """The replicas of the step being traced, as a model's loss asks about them (like `losses.OneReplica`).

    Whoever compiles a model for a run passes `STEP_REPLICAS` to the model's
    `use_replicas` (`ReplicaAware`): `count()` is `replicas_in_step()` and
    `mean(value)` is `mean_over_replicas(value)`, both read when the step is
    traced (`count()` is 1 outside a multi-replica step, and under backends
    other than TensorFlow).
    """

    def count(self):
        return replicas_in_step()

    def mean(self, value):
        return mean_over_replicas(value)


STEP_REPLICAS = StepReplicas()


def shard_by_data(dataset):
    """Sets data sharding: every worker reads the whole in-memory pipeline and keeps its share of each batch.

    The task pipelines are built from tensors in memory, not files, so
    sharding by file (TensorFlow's first choice) cannot apply.
    """
    import tensorflow as tf

    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)


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


def divisible_batches(batches, multiple):
    """Each batch cut to a multiple of `multiple` rows, and those left empty dropped: Keras' JAX
    `DataParallel` shards a batch's rows evenly over its devices, so a last, partial batch must divide.

    At most `multiple - 1` examples of a partial batch sit out an epoch; which
    ones changes with the shuffle order.
    """
    import tensorflow as tf

    def rows(*element):
        return tf.shape(tf.nest.flatten(element)[0])[0]

    def cut(*element):
        keep = rows(*element) // multiple * multiple
        return tf.nest.map_structure(lambda tensor: tensor[:keep], element if len(element) > 1 else element[0])

    return batches.map(cut).filter(lambda *element: rows(*element) > 0)
