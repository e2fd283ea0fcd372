import json

import pytest

from seqtasks.training.distribute import choose_strategy, cluster_workers, make_strategy
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
    from conftest import run_python
    from trained_runs import EXACT_RESUME, RESUMABLE, json_lines, stop_and_resume_script, write_translation_for_resume

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
    # another order from run to run (tests/test_replica_equivalence.py), hence a tolerance far
    # below what losing the totals of the epoch's first steps changes.
    for name, values in uninterrupted.items():
        assert resumed[name] == pytest.approx(values, rel=1e-4), name
