"""Training behaves as it did when tests/data/reference_runs*.json was recorded, bit for bit: a few
PPO iterations of cartpole, quadruped and quadruped_rough and two SHAC iterations of
cartpole_swingup, each through scripts/train.py (tests/reference_runs.py). Code that moves or
is reorganised must leave every return, loss and checkpoint tensor as it was; a change meant to
alter behaviour records the reference anew (`python tests/reference_runs.py`) and says why in
its commit."""

import json

import pytest
import reference_runs


@pytest.mark.parametrize("name", list(reference_runs.CASES))
def test_training_gives_the_recorded_numbers(name, tmp_path):
    records = json.loads(reference_runs.RECORD.read_text()) if reference_runs.RECORD.exists() else {}
    if name not in records:
        pytest.skip(f"no reference of {name} recorded on this kind of processor ({reference_runs.cpu_vendor()}, "
                    f"{reference_runs.RECORD.name}): python tests/reference_runs.py {name} records it")
    expected = records[name]
    actual = reference_runs.run(name, tmp_path)
    assert not reference_runs.differences(expected, actual), (
        f"{name} differs from tests/data/{reference_runs.RECORD.name}:\n  "
        + "\n  ".join(reference_runs.differences(expected, actual)))


def test_a_changed_number_is_reported():
    record = json.loads(reference_runs.record_path("GenuineIntel").read_text())["cartpole_ppo"]
    changed = json.loads(json.dumps(record))
    tensor = next(k for k in changed["weights"] if k.startswith("actor_state_dict.mlp.0.weight"))
    changed["weights"][tensor][0] = "0" * 64
    changed["scalars"]["Loss/value"][1][1] += 1e-7
    lines = reference_runs.differences(record, changed)
    assert len(lines) == 2 and lines[0].startswith("scalars[Loss/value]") and tensor in lines[1]
