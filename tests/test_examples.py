"""The gradient-descent examples converge within their 200 iterations (slow: minutes)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.parametrize("example", ["ball_bounce.py", "cartpole_swingup.py"])
def test_example_converges(example):
    result = subprocess.run([sys.executable, str(ROOT / "examples" / example)], cwd=ROOT, capture_output=True,
                            text=True, timeout=1800)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "converged in" in result.stdout
