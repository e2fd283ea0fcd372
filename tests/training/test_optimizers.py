"""The optimizers' learning-rate schedules, by epoch."""

import numpy as np
import pytest


def test_the_inverse_time_schedule_lowers_the_rate_at_each_epoch_start():
    from seqtasks.training.optimizers import EpochSchedule

    schedule = EpochSchedule(0.01, "inverse_time", decay=0.5, steps_per_epoch=10)
    values = [float(schedule(step)) for step in (0, 9, 10, 19, 20, 45)]
    np.testing.assert_allclose(values, [0.01, 0.01, 0.01 / 1.5, 0.01 / 1.5, 0.01 / 2, 0.01 / 3], rtol=1e-6)
    cosine = EpochSchedule(0.01, "cosine", epochs=4, steps_per_epoch=10)
    np.testing.assert_allclose([float(cosine(s)) for s in (0, 20, 40, 80)], [0.01, 0.005, 0, 0], atol=1e-8)
    assert EpochSchedule.from_config(schedule.get_config()).get_config() == schedule.get_config()
    with pytest.raises(ValueError, match="steps_per_epoch"):
        EpochSchedule(0.01, "inverse_time", decay=0.5)(3)
