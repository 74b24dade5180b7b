"""The README's example runs, and .ci/run calls exactly the README's test command."""
import re
import runpy
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def test_readme_example_runs(tmp_path):
    # run from a real file, as a user would: lambdas are translated from their source
    script = tmp_path / "readme_example.py"
    script.write_text("\n".join(re.findall(r"```python\n(.*?)```", README, re.S)))
    namespace = runpy.run_path(str(script))
    assert np.allclose(namespace["C"], np.einsum("ecbfa,fd->abcde", namespace["A"], namespace["B"]))


def test_ci_runs_the_readme_test_command():
    commands = re.findall(r"```\n(python3 -m venv .*?)\n```", README)
    test_command = [c for c in commands if "pytest" in c]
    assert len(test_command) == 1
    ci = (REPO / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == test_command[0]
