"""benchmarks/tile_sweep.py's configuration strings: each field lands in the KernelConfig it names, so a
sweep times the kernels its labels say."""
import importlib.util
from pathlib import Path

import pytest

from gett.config import KernelConfig

_spec = importlib.util.spec_from_file_location(
    "tile_sweep", Path(__file__).resolve().parents[1] / "benchmarks" / "tile_sweep.py")
tile_sweep = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tile_sweep)


@pytest.mark.parametrize("text,expected", [
    ("mma16:128x128x32:s3:w64x32", KernelConfig("mma16", 128, 128, 32, 3, wm=64, wn=32)),
    ("wgmma:128x256x64:s4:k44:ws", KernelConfig("wgmma", 128, 256, 64, 4, split_k=44, ws=True)),
    ("simt:128x64x16:s3:t8x4", KernelConfig("simt", 128, 64, 16, 3, tm=8, tn=4)),
])
def test_configuration_strings(text, expected):
    cfg = tile_sweep.parse_config(text)
    assert cfg == expected
    cfg.validate()
    assert cfg.key() == expected.key()


def test_unknown_field_is_refused():
    with pytest.raises(ValueError, match="unknown configuration field 'x8'"):
        tile_sweep.parse_config("mma16:128x128x32:s3:x8")
