"""Distribution strategies: choosing one, the chief, mirrored and multi-worker training, JAX's data parallelism.

Two replicas train exactly as one device does on the same global batches (small models: the sums, not the
sizes, are under test). Two worker processes on localhost train one model with MultiWorkerMirroredStrategy.
"""

import json
import math
import os
import socket
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from seqtasks.errors import SeqtasksError
from seqtasks.recipe.schema import DistributeConfig
from seqtasks.training.distribute import choose_strategy, cluster_workers, divisible_batches, make_strategy
from tests.conftest import REPO


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


@pytest.mark.slow  # several seconds: the fast tier stays under 3 minutes
def test_mirrored_over_two_logical_cpus(fresh_python):
    result = fresh_python(
        """
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from seqtasks.training.distribute import choose_strategy, cluster_workers, make_strategy
from seqtasks.recipe.schema import DistributeConfig
strategy = make_strategy(DistributeConfig(strategy="mirrored", devices=["/cpu:0", "/cpu:1"]))
assert strategy.num_replicas_in_sync == 2, strategy.num_replicas_in_sync
print("replicas", strategy.num_replicas_in_sync)
"""
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "replicas 2" in result.stdout


@pytest.mark.parametrize(
    "strategy, gpus, workers, tpu, expected",
    [
        ("auto", 0, 0, False, "default"),
        ("auto", 1, 0, False, "default"),
        ("auto", 4, 0, False, "mirrored"),
        ("auto", 4, 2, False, "multi_worker"),
        ("auto", 0, 1, False, "default"),
        ("auto", 8, 2, True, "tpu"),
        ("one_device", 4, 2, True, "one_device"),
        ("mirrored", 0, 0, False, "mirrored"),
    ],
)
def test_auto_picks_tpu_then_workers_then_gpus(strategy, gpus, workers, tpu, expected):
    assert choose_strategy(strategy, gpus, workers, tpu) == expected


def test_tf_config_workers_are_counted_and_bad_tf_config_is_named():
    cluster = {"cluster": {"chief": ["a:1"], "worker": ["b:2", "c:3"], "ps": ["d:4"]}, "task": {"type": "worker", "index": 0}}
    import json

    assert cluster_workers({"TF_CONFIG": json.dumps(cluster)}) == 3
    assert cluster_workers({}) == 0
    with pytest.raises(SeqtasksError, match=r"TF_CONFIG: not valid JSON"):
        cluster_workers({"TF_CONFIG": "{cluster"})
    with pytest.raises(SeqtasksError, match=r"TF_CONFIG: expected a JSON object with a 'cluster' mapping"):
        cluster_workers({"TF_CONFIG": "[]"})


def test_the_same_settings_give_the_same_strategy_object():
    config = DistributeConfig(strategy="one_device", devices=["/cpu:0"])
    assert make_strategy(config) is make_strategy(DistributeConfig(strategy="one_device", devices=["/cpu:0"]))


def test_devices_with_a_strategy_that_ignores_them_is_a_recipe_error(tmp_path):
    from seqtasks.errors import RecipeError
    from seqtasks.recipe import load_recipe

    (tmp_path / "r.yaml").write_text("task: toy\ndistribute:\n  strategy: multi_worker\n  devices: [/gpu:0]\n")
    with pytest.raises(RecipeError, match=r"r.yaml: distribute.devices: only for 'one_device' and 'mirrored'"):
        load_recipe(tmp_path / "r.yaml")


@pytest.mark.parametrize(
    "tf_config, chief",
    [
        (None, True),
        ({"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 0}}, True),
        ({"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}, False),
        ({"cluster": {"chief": ["a:1"], "worker": ["b:2"]}, "task": {"type": "worker", "index": 0}}, False),
        ({"cluster": {"chief": ["a:1"], "worker": ["b:2"]}, "task": {"type": "chief", "index": 0}}, True),
    ],
)
def test_only_the_chief_writes_results(tf_config, chief):
    import json

    from seqtasks.training.distribute import is_chief

    assert is_chief({} if tf_config is None else {"TF_CONFIG": json.dumps(tf_config)}) is chief


@pytest.mark.slow
@pytest.mark.core
def test_a_worker_that_is_not_the_chief_exports_nothing(tmp_path, monkeypatch):
    import json

    import tensorflow as tf

    from seqtasks.export.saved_model import export_saved_model

    class Module(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
        def serve(self, x):
            return {"y": x * 2.0}

    module = Module()
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}))
    assert export_saved_model(module, module.serve, tmp_path / "exports", "m") is None
    assert not (tmp_path / "exports").exists()
    monkeypatch.delenv("TF_CONFIG")
    assert export_saved_model(module, module.serve, tmp_path / "exports", "m") == tmp_path / "exports" / "m" / "1"


_EVERY_TASK = """
import glob, json, math, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from click.testing import CliRunner
from seqtasks.cli import main
# The devices named as the exact-resume recipe names them: one MirroredStrategy for every run of the process (two
# strategies over the same devices mix up their collective operations).
common = ["distribute.strategy=mirrored", "distribute.devices=[/cpu:0, /cpu:1]", "training.epochs=1", "export.enabled=false",
          "training.max_minutes=0.03"]
# Tiny models: this checks that every task's model, loss and pipeline run on two replicas, not what they learn.
tiny = ["model.encoder.units=8", "model.decoder.units=8", "model.embedding_dim=8", "model.decoding.beam_width=1"]
extra = {
    "toy": ["data.train_size=300", "data.validation_size=20"] + tiny,
    # The exact-resume recipe (RNNsearch's decoder, dropout, two epochs, a step checkpoint every 3 steps), whole:
    # the uninterrupted run the run stopped mid-epoch and resumed below must equal.
    "translation": RESUME_OVERRIDES + ["training.max_minutes=null", "name=translation"],
    "sentiment": ["data.validation_size=20", "data.vocab_size=300", "model.encoder.units=8", "model.embedding_dim=8"],
    "ner": ["model.encoder.units=8", "model.word_embedding_dim=8", "model.char_filters=4"],
    "captioning": ["data.max_train_images=41", "data.max_validation_images=5", "model.decoder.units=8", "model.decoding.beam_width=1"],
}
recipes = {"translation": RESUME_RECIPE}
results = {}
for task, overrides in extra.items():
    flags = [flag for override in common + overrides for flag in ("--set", override)]
    out = CliRunner().invoke(main, ["run", recipes.get(task, task), "--output-dir", sys.argv[1] + "/" + task] + flags)
    finite = None
    for metrics in glob.glob(sys.argv[1] + "/" + task + "/*/*/metrics.json"):
        history = json.load(open(metrics))["history"]
        finite = all(math.isfinite(value) for key in ("loss", "val_loss") for value in history[key])
    results[task] = [out.exit_code, str(out.exception or "")[-500:], finite]
print(json.dumps(results), flush=True)
"""


@pytest.fixture(scope="module")
def two_replica_runs(tmp_path_factory):
    """Every task trained under MirroredStrategy over two logical CPUs in one fresh process; then the translation
    run's recipe stopped at a step checkpoint mid-epoch and resumed there. Returns the sweep's outcomes, the
    folder it trained in, and the resumed run's history."""
    from tests.conftest import run_python
    from tests.support.trained_runs import EXACT_RESUME, RESUMABLE, json_lines, stop_and_resume_script, write_translation_for_resume

    root = tmp_path_factory.mktemp("mirrored")
    resume = root / "resume"
    resume.mkdir()
    overrides = [*write_translation_for_resume(resume), "distribute.strategy=mirrored", "distribute.devices=[/cpu:0, /cpu:1]"]
    script = _EVERY_TASK.replace("sys.argv[1]", repr(str(root))).replace("RESUME_RECIPE", repr(str(resume / "recipe.yaml")))
    script = script.replace("RESUME_OVERRIDES", repr([*RESUMABLE, *overrides]))
    script += stop_and_resume_script(resume, [*EXACT_RESUME, *overrides], uninterrupted=False)
    result = run_python(script, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    *_, outcomes, resumed = json_lines(result.stdout)
    return outcomes, root, resumed


@pytest.mark.slow
def test_every_task_trains_under_mirrored_strategy_on_two_logical_cpus(two_replica_runs):
    # 41 captioning images (123 captions) leave batches of odd size, split unevenly over the replicas.
    results, _, _ = two_replica_runs
    # Finite losses: a replica given no example of an odd batch adds nothing rather than NaN.
    assert results == {task: [0, "", True] for task in ("toy", "translation", "sentiment", "ner", "captioning")}


@pytest.mark.slow
def test_a_mirrored_run_over_two_replicas_resumes_mid_epoch_as_the_uninterrupted_run(two_replica_runs):
    _, root, found = two_replica_runs
    (metrics,) = (root / "translation").glob("*/*/metrics.json")
    uninterrupted, resumed = json.loads(metrics.read_text())["history"], found["resumed"]
    assert found["epochs"] == 2
    assert uninterrupted.keys() == resumed.keys() and len(uninterrupted["loss"]) == 2
    # Each replica keeps its own running metric totals; the sums over replicas may add up in
    # another order from run to run (test_two_replicas_train_like_one_device_..., below), hence a tolerance far
    # below what losing the totals of the epoch's first steps changes.
    for name, values in uninterrupted.items():
        assert resumed[name] == pytest.approx(values, rel=1e-4), name


_SCRIPT = """
import json, sys
import numpy as np
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from seqtasks.cli import resolve_recipe
from seqtasks.recipe import load_recipe
from seqtasks.training.fit import train_model

STRATEGIES = {
    "one": ["distribute.strategy=one_device", "distribute.devices=[/cpu:0]"],
    "two": ["distribute.strategy=mirrored", "distribute.devices=[/cpu:0, /cpu:1]"],
}
# An odd batch splits 5/4 over the replicas, with different numbers of real tokens;
# a tiny clipnorm clips every step, so clipping must happen after the replicas' gradients are summed. No time
# limit (the built-in recipes have one): on a busy machine the NER recipe's 2 minutes once stopped the mirrored
# run after its first step.
COMMON = ["training.epochs=1", "training.batch_size=9", "training.clipnorm=0.01", "training.learning_rate=0.01",
          "training.max_minutes=null"]


def translation(overrides):
    from seqtasks.data.parallel_corpus import read_parallel_tsv
    from seqtasks.models import Seq2Seq
    from seqtasks.encoder_decoder.training import compile_model
    from seqtasks.tasks.translation.task import make_dataset
    from seqtasks.text.subword_tokenizer import SubwordTokenizer, learn_vocabulary

    recipe = load_recipe(resolve_recipe("translation"), COMMON + overrides + ["model.decoder.dropout=0", "model.embedding_dim=16", "model.encoder.units=16", "model.decoder.units=32"])
    data = recipe.data
    pairs = read_parallel_tsv(data.path, data.source_column, data.target_column, data.encoding)[:45]
    source = SubwordTokenizer(learn_vocabulary([s for s, _ in pairs], 300, True), True)
    target = SubwordTokenizer(learn_vocabulary([t for _, t in pairs], 300, True), True)
    dataset = make_dataset(pairs, source, target, 30, 9, shuffle_seed=3)
    make = lambda: Seq2Seq.from_recipe(recipe.model, source.vocab_size, target.vocab_size, seed=1)
    return recipe, make, lambda model: compile_model(model, recipe.training), dataset


def ner(overrides):
    from seqtasks.models import SequenceTagger
    from seqtasks.tasks import make_task
    from seqtasks.tasks.ner import task
    from seqtasks.text.token_features import TokenFeaturizer, build_vocabularies

    recipe = load_recipe(resolve_recipe("ner"), COMMON + overrides + ["model.dropout=0", "model.word_dropout=0", "model.word_embedding_dim=16", "model.encoder.units=16"])
    train, validation = make_task(recipe).read_splits()
    train = train[:45]
    tags = task.tag_vocabulary(recipe.data, train, validation)
    words, chars = build_vocabularies([w for w, _ in train], False, 1)
    featurizer = TokenFeaturizer(words, chars, False, 20)
    dataset = task.make_dataset(train, featurizer, {t: i for i, t in enumerate(tags)}, 9, shuffle_seed=3)
    make = lambda: SequenceTagger.from_recipe(recipe.model, len(words), len(chars), len(tags), seed=1)
    # The task's own compiling: it hands the tagger the strategy's replicas (models do not import the runtime).
    return recipe, make, make_task(recipe).compile_model, dataset


results = {}
for name, setup, extra in [
    ("translation", translation, []),
    ("ner", ner, ["model.output=softmax"]),  # the CRF tagger weighs its mean over sentences the same way
]:
    initial, trained = None, {}
    for label, overrides in STRATEGIES.items():
        recipe, make, compile_model, dataset = setup(extra + overrides)

        def make_model():
            model = make()
            model.build()
            if initial is not None:
                model.set_weights(initial)
            return model

        if initial is None:
            with tf.device("/cpu:0"):
                initial = make_model().get_weights()
        model, history, _ = train_model(recipe, f"{sys.argv[1]}/{name}-{label}", make_model, compile_model, dataset, dataset)
        trained[label] = (model.get_weights(), int(model.optimizer.iterations.numpy()), history.history["loss"][0])
    one, two = trained["one"], trained["two"]
    results[name] = {
        "steps": [one[1], two[1]],
        "loss": [one[2], two[2]],
        "moved": max(float(np.max(np.abs(a - b))) for a, b in zip(one[0], initial)),
        "difference": max(float(np.max(np.abs(a - b))) for a, b in zip(one[0], two[0])),
    }
print(json.dumps(results))
"""


@pytest.mark.slow
def test_two_replicas_train_like_one_device_on_the_same_global_batches(fresh_python, tmp_path):
    result = fresh_python(_SCRIPT.replace("sys.argv[1]", repr(str(tmp_path))), timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads(result.stdout.strip().splitlines()[-1])
    for name, found in results.items():
        one_steps, two_steps = found["steps"]
        assert one_steps == two_steps >= 5, (name, found)
        assert abs(found["loss"][0] - found["loss"][1]) < 1e-4, (name, found)
        assert found["moved"] > 1e-3, (name, found)
        # Float sums in another order differ run to run (2.7e-6 to 7.2e-5 seen for translation), and
        # Adam magnifies the differences in near-zero gradients; a real divergence is far above this.
        assert found["difference"] < 1e-3 * found["moved"], (name, found)


def _free_port():
    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_two_workers_train_in_step_and_only_the_chief_exports(tmp_path):
    cluster = {"worker": [f"localhost:{_free_port()}" for _ in range(2)]}
    processes = []
    for index in range(2):
        folder = tmp_path / f"worker{index}"
        env = {
            **os.environ,
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}),
        }
        command = [sys.executable, "-m", "seqtasks", "run", "toy", "--output-dir", str(folder / "runs")]
        for override in [
            "distribute.strategy=auto",  # TF_CONFIG with two workers: MultiWorkerMirroredStrategy
            "training.epochs=2",
            "data.train_size=512",
            "data.validation_size=64",
            f"export.directory={folder / 'saved_models'}",
        ]:
            command += ["--set", override]
        processes.append(
            subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO)
        )
    outputs = []
    try:
        outputs = [process.communicate(timeout=420)[0] for process in processes]
    finally:
        for process in processes:
            process.kill()
    for process, output in zip(processes, outputs):
        assert process.returncode == 0, output[-3000:]
    histories = []
    for index in range(2):
        (metrics,) = (tmp_path / f"worker{index}" / "runs").glob("toy/*/metrics.json")
        histories.append(json.loads(metrics.read_text())["history"])
    # Losses are reduced over both workers' replicas, so both report the same numbers.
    np.testing.assert_allclose(histories[0]["loss"], histories[1]["loss"], rtol=1e-5)
    np.testing.assert_allclose(histories[0]["val_loss"], histories[1]["val_loss"], rtol=1e-5)
    # Mirrored variables: both workers end with the same weights.
    import keras

    import seqtasks.training.losses  # noqa: F401 - registers the classes the saved models name
    import seqtasks.models  # noqa: F401

    models = [
        keras.models.load_model(
            next((tmp_path / f"worker{index}" / "runs").glob("toy/*/model/model.keras")), safe_mode=True, compile=False
        )
        for index in range(2)
    ]
    for first, second in zip(models[0].weights, models[1].weights):
        np.testing.assert_allclose(first.numpy(), second.numpy(), rtol=1e-6, atol=1e-7)
    assert histories[0]["loss"][-1] < histories[0]["loss"][0]
    assert (tmp_path / "worker0" / "saved_models" / "toy" / "1" / "saved_model.pb").is_file()
    assert not (tmp_path / "worker1" / "saved_models").exists()
    assert "SavedModel:" in outputs[0] and "SavedModel:" not in outputs[1]


_TWO_DEVICES = """
import json, sys
import jax
from click.testing import CliRunner
from seqtasks.cli import main
from seqtasks.training.distribute import make_strategy
from seqtasks.recipe.schema import DistributeConfig
assert len(jax.devices()) == 2, jax.devices()
replicas = {name: make_strategy(DistributeConfig(strategy=name), "jax").num_replicas_in_sync
            for name in ("auto", "mirrored", "default", "one_device")}
flags = []
# 257 and 33 examples: batches of 32 leave partial batches that do not divide over two devices.
for override in ["distribute.strategy=mirrored", "training.epochs=1", "export.enabled=false", "data.train_size=257",
                 "data.validation_size=33", "training.batch_size=32", "model.decoding.beam_width=1"]:
    flags += ["--set", override]
out = CliRunner().invoke(main, ["run", "toy", "--output-dir", sys.argv[1]] + flags)
print(json.dumps({"exit": out.exit_code, "output": out.output[-2000:], "error": str(out.exception or "")[-1000:],
                  "replicas": replicas}))
"""


@pytest.mark.slow
def test_jax_trains_data_parallel_over_two_devices_with_uneven_batches(tmp_path, jax_env):
    from tests.conftest import run_python

    env = dict(jax_env, XLA_FLAGS="--xla_force_host_platform_device_count=2")
    result = run_python(_TWO_DEVICES.replace("sys.argv[1]", repr(str(tmp_path))), env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["exit"] == 0, outcome
    assert outcome["replicas"] == {"auto": 2, "mirrored": 2, "default": 1, "one_device": 1}
    (metrics,) = tmp_path.glob("*/*/metrics.json")
    history = json.loads(metrics.read_text())["history"]
    assert all(math.isfinite(v) for v in history["loss"] + history["val_loss"])


def test_batches_are_cut_to_a_multiple_of_the_devices_and_empty_ones_dropped():
    sizes = [8, 7, 3, 1]
    batches = tf.data.Dataset.from_generator(
        lambda: (({"ids": np.arange(n * 2).reshape(n, 2)}, np.arange(n)) for n in sizes),
        output_signature=({"ids": tf.TensorSpec([None, 2], tf.int64)}, tf.TensorSpec([None], tf.int64)),
    )
    cut = list(divisible_batches(batches, 4).as_numpy_iterator())
    assert [labels.tolist() for _, labels in cut] == [list(range(8)), [0, 1, 2, 3]]
    assert cut[1][0]["ids"].tolist() == [[0, 1], [2, 3], [4, 5], [6, 7]]


def test_on_one_device_every_batch_is_kept_even_of_one_row():
    cut = divisible_batches(tf.data.Dataset.range(4).batch(3).map(lambda ids: (ids, -ids)), 1)
    assert [(ids.tolist(), labels.tolist()) for ids, labels in cut.as_numpy_iterator()] == [
        ([0, 1, 2], [0, -1, -2]),
        ([3], [-3]),
    ]
