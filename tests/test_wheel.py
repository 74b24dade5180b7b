"""The built wheel works on its own: installed into a fresh virtual environment, imported and used
from outside the repository, with the device headers it needs packaged inside."""
import subprocess
import sys
import textwrap
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import numpy as np, gett, gett.kernel, os
    assert "site-packages" in gett.__file__, gett.__file__
    headers = gett.kernel.kernels_dir()
    assert "site-packages" in str(headers) and (headers / "gett.cuh").is_file(), headers
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((6, 5, 4)), rng.standard_normal((5, 3))
    C = np.zeros((4, 6, 3))
    plan = gett.plan_contraction(A, "abk", B, "bn", C, "kan")
    gett.contract(plan, 1.0, A, B, 0.0, C)
    assert np.allclose(C, np.einsum("abk,bn->kan", A, B))
    # the packaged headers compile: a kernel built ahead for sm_90, no GPU needed
    d = gett.TensorDescriptor
    p = gett.plan_contraction(d((64, 32), None, "f16"), "mk", d((32, 48), None, "f16"), "kn",
                              d((64, 48), None, "f32"), "mn", device_arch="sm_90")
    assert p.kernel_report.spill_stores == 0
    print("wheel ok", p.kernel_report)
""")


def test_wheel_installs_and_runs_outside_the_repo(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                    "-w", str(dist), str(REPO)], check=True)
    wheel = next(dist.glob("gett-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", str(wheel)], check=True)
    work = tmp_path / "elsewhere"
    work.mkdir()
    out = subprocess.run([str(py), "-c", SCRIPT], cwd=work, capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GETT_CACHE_DIR": str(tmp_path / "cache")})
    assert out.returncode == 0, out.stderr
    assert "wheel ok" in out.stdout
