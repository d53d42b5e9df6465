"""Every ```python block of the documentation runs."""

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
BLOCKS = [(path.name, i, code) for path in sorted(DOCS.glob("*.md"))
          for i, code in enumerate(re.findall(r"```python\n(.*?)```", path.read_text(), re.S))]


@pytest.mark.parametrize("name,index,code", BLOCKS, ids=[f"{n}-{i}" for n, i, _ in BLOCKS])
def test_doc_example_runs(name, index, code):
    exec(compile(code, f"{name} example {index}", "exec"), {"__name__": "__doc_example__"})
