"""The sentiment classifier's ensemble training: its members' loss and the ensemble's accuracy."""

import numpy as np

from seqtasks.tasks.sentiment.training import EnsembleAccuracy, MemberCrossentropy


def test_ensemble_accuracy_is_that_of_the_mean_probabilities():
    # Member 0 says class 1 weakly, member 1 class 0 strongly: the mean says class 0.
    members = np.log(np.array([[[0.4, 0.6], [0.9, 0.1]], [[0.2, 0.8], [0.3, 0.7]]], "float32"))
    accuracy = EnsembleAccuracy()
    accuracy.update_state(np.array([0, 1]), members)
    assert float(accuracy.result()) == 1.0
    accuracy.reset_state()
    accuracy.update_state(np.array([1, 1]), members[:, 0])  # plain logits too
    assert float(accuracy.result()) == 1.0


def test_member_loss_config_round_trip():
    loss = MemberCrossentropy(0.2)
    assert MemberCrossentropy.from_config(loss.get_config()).label_smoothing == 0.2
