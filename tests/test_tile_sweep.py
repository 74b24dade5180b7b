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


def test_twins_take_a_tccg_contractions_extents_in_other_layouts():
    """``--twins 17:abc-adc-db``: TCCG #17's extents with B K-major in memory; the same GEMM sizes and bytes,
    B's strides those of its new mode order, and gett plans it."""
    import gett
    from tccg_suite.suite import select
    (twin,) = tile_sweep.parse_twins("17:abc-adc-db")
    base = select([17])[0]
    assert (twin.id, twin.notation) == (17, "abc-adc-db")
    assert (twin.modes("A"), twin.modes("B"), twin.modes("C")) == ("adc", "db", "abc")
    assert (twin.m, twin.n, twin.k, twin.flops) == (base.m, base.n, base.k, base.flops)
    assert twin.min_bytes(2, 2, False) == base.min_bytes(2, 2, False)
    assert twin.strides("B") == (1, base.extents["d"]) and base.strides("B") == (1, base.extents["b"])
    d = {t: gett.TensorDescriptor(twin.shape(t), twin.strides(t), "f16") for t in "ABC"}
    plan = gett.plan_contraction(d["A"], twin.modes("A"), d["B"], twin.modes("B"), d["C"], twin.modes("C"))
    assert plan.tables["K"].strides_of("B") == (1,)
    assert [c.notation for c in tile_sweep.parse_twins("16:abc-ad-dbc,17:abc-adc-db")] == ["abc-ad-dbc", "abc-adc-db"]


def test_a_twin_with_a_mode_the_contraction_lacks_is_refused():
    with pytest.raises(ValueError, match="#17 has no mode x"):
        tile_sweep.parse_twins("17:abx-adc-db")
