"""The step profiler's reading of a TensorFlow trace: each event's own time, by kind."""

import pytest

from benchmarks.step_profile import _op_kind, read_profile


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("model/dense/MatMul:_MklMatMul", "matmul"),
        ("gradient_tape/attention/MatMul_1:_MklBatchMatMulV2", "matmul"),
        ("model/transpose:_MklTranspose", "transpose"),
        ("IteratorGetNext:IteratorGetNext", "waiting_for_input"),
        ("gradients/AddN_8:AddN", "other_ops"),
        ("ExecutorState::Process", None),
        ("ThreadpoolListener::Record", None),
    ],
)
def test_op_events_are_told_from_the_executor_s_own(name, kind):
    assert _op_kind(name) == kind


def _space(tmp_path, lines):
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    plane = space.planes.add(name="/host:CPU")
    ids = {}
    for line_name, events in lines.items():
        line = plane.lines.add(name=line_name)
        for name, start, duration in events:
            ids.setdefault(name, len(ids) + 1)
            plane.event_metadata[ids[name]].name = name
            line.events.add(metadata_id=ids[name], offset_ps=start * 10**9, duration_ps=duration * 10**9)
    folder = tmp_path / "plugins" / "profile" / "run"
    folder.mkdir(parents=True)
    (folder / "host.xplane.pb").write_bytes(space.SerializeToString())
    return tmp_path


def test_nested_events_count_only_their_own_time_and_other_threads_are_left_out(tmp_path):
    logdir = _space(tmp_path, {
        "tf_Compute/1": [
            ("ExecutorState::Process", 0, 100),  # 100 ms, of which 30 + 20 are ops inside it
            ("a/MatMul:_MklMatMul", 10, 30),
            ("b/AddN:AddN", 50, 20),  # 20 ms, 5 of them the Mul inside it
            ("c/Mul:Mul", 52, 5),
            ("ThreadpoolListener::Record", 60, 1),
        ],
        "tf_Compute/2": [("d/MatMul:_MklMatMul", 0, 7)],
        "tf_data_iterator_resource/3": [("Iterator::Root::Prefetch", 0, 4)],
        "tf_data_iterator_get_next/6": [("IteratorGetNextOp::DoCompute", 0, 3), ("Iterator::Root", 1, 2)],
        "python": [("EagerExecute", 0, 1000)],
        "tf_numa_-1_Eigen/4": [("e/MatMul:_MklMatMul", 0, 500)],
    })
    totals, by_op = read_profile(logdir)
    assert totals == pytest.approx({"executor": 50.0, "matmul": 37.0, "other_ops": 20.0, "input_pipeline": 4.0, "waiting_for_input": 3.0})
    assert by_op["AddN"] == pytest.approx(15.0) and by_op["Mul"] == pytest.approx(5.0)
    assert by_op["_MklMatMul"] == pytest.approx(37.0)
