"""`python -m seqtasks.lifecycle.tensorflow_export REQUEST`: the TensorFlow process of `seqtasks.lifecycle.backends.export_in_tensorflow`."""

import json
import sys
from pathlib import Path

from seqtasks.errors import SeqtasksError


def export_request(path):
    """Exports as the request file says and writes the result file."""
    from seqtasks.recipe import load_recipe
    from seqtasks.lifecycle.runner import Runner

    request = json.loads(Path(path).read_text(encoding="utf-8"))
    answer = {"exported": None, "error": None}
    try:
        runner = Runner(load_recipe(request["recipe_file"]), request["run_dir"])
        runner.task.restore(runner.run_dir)
        others = request.get("ensemble", [])
        model = runner.ensemble(others, request["checkpoint"]) if others else runner.load_model(request["checkpoint"])
        exported = runner._export(model, request["checkpoint"], request["metrics"], request["force"],
                                  request.get("notes", []), request.get("run_metrics", True))
        answer["exported"] = None if exported is None else str(exported)
    except SeqtasksError as error:
        answer["error"] = str(error)
    Path(request["result"]).write_text(json.dumps(answer), encoding="utf-8")


if __name__ == "__main__":
    export_request(sys.argv[1])
