"""compute-sanitizer (memcheck and racecheck) over 60 generated contractions reports no errors."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
HERE = Path(__file__).resolve().parent


def _sanitizer():
    found = shutil.which("compute-sanitizer")
    for candidate in (found, "/usr/local/cuda/bin/compute-sanitizer"):
        if candidate and Path(candidate).exists():
            return candidate
    pytest.skip("compute-sanitizer is not installed")


@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
def test_sanitizer_finds_nothing(tool):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), str(HERE.parent), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([_sanitizer(), "--tool", tool, "--error-exitcode", "3", sys.executable,
                           str(HERE / "sanitizer_cases.py"), "60"], capture_output=True, text=True, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "ERROR SUMMARY: 0 errors" in out or "RACECHECK SUMMARY: 0 hazards" in out, out[-4000:]
    assert "60 contractions ran" in out, out[-2000:]
    for path in ("f16-f32", "bf16-f32", "f32-f32-tf32", "f32-f32-3xtf32", "f64-f64", "c64-c64", "c128-c128",
                 "i32-i32", "i64-i64"):
        assert path in out, f"no {path} contraction ran under {tool}"
    import cupy
    if cupy.cuda.Device().compute_capability == "90":
        assert "wgmma×8" in out and "persistent×4" in out, out[-2000:]
