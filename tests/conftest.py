"""Test set-up: GPU tests (marker ``gpu``) skip themselves where no CUDA device is visible."""
import os

import pytest


def _has_gpu() -> bool:
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


HAS_GPU = _has_gpu()


def pytest_collection_modifyitems(config, items):
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="no CUDA device on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _private_kernel_cache(tmp_path_factory):
    """Compile into a throw-away cache unless the caller chose one (e.g. a pre-warmed cache)."""
    if "GETT_CACHE_DIR" not in os.environ:
        os.environ["GETT_CACHE_DIR"] = str(tmp_path_factory.mktemp("gett-cache"))
    yield
