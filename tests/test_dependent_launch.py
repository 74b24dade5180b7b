"""Kernels launched behind one another (gett/dependent_launch.py): the ctypes mirror of cuda.h's launch
structures, and that every kernel a plan launches waits for the kernels before it before it touches
memory (its launch may come before they finish). The launches themselves: tests/test_gpu_chain.py."""
import ctypes
import re

import pytest

import gett
from gett.codegen import render_kernel
from gett.config import KernelConfig
from gett.dependent_launch import _Attribute, _Config
from gett.staging import render_copy
from tccg_suite.suite import select

D = gett.TensorDescriptor


def test_launch_structures_match_cuda_h():
    """CUlaunchAttribute: a 4-byte id, padding to 8, a 64-byte value union; CUlaunchConfig: six
    unsigned ints, the shared bytes, then the stream, the attributes and their count (8-byte aligned)."""
    assert ctypes.sizeof(_Attribute) == 72 and _Attribute.value.offset == 8
    assert ctypes.sizeof(_Config) == 56
    assert (_Config.shared.offset, _Config.stream.offset, _Config.attrs.offset, _Config.num_attrs.offset) == \
        (24, 32, 40, 48)


def _kernel_bodies(source: str) -> list:
    """The first statement of each ``extern "C" __global__`` function of ``source``."""
    heads = re.findall(r'extern "C" __global__ void[^{]*\{\s*([^;]*;)', source)
    assert heads, "no kernel in the source"
    return heads


@pytest.mark.parametrize("cid,config", [
    (13, None),                                                            # wgmma, split K: and its reduction
    (14, None),                                                            # A staged: the transposing copy
    (12, KernelConfig("mma16", 128, 128, 32, 3, wm=64, wn=64, split_k=4)),  # mma.sync, split K
    (1, None),                                                             # one kernel
])
def test_every_kernel_waits_for_the_kernels_before_it_first(cid, config):
    c = select([cid])[0]
    mk = lambda t: D(c.shape(t), c.strides(t), "f16")
    plan = gett.plan_contraction(mk("A"), c.modes("A"), mk("B"), c.modes("B"), mk("C"), c.modes("C"), beta=0,
                                 device_arch="sm_90", config=config)
    inner = plan.staged_plan or plan
    sources = [render_kernel(inner, config or inner.kernel("sm_90").config)[0]]
    sources += [render_copy(st).source for st in plan.staging]
    assert bool(plan.staging) == (cid == 14)
    heads = [h for s in sources for h in _kernel_bodies(s)]
    assert len(heads) == 1 + len(plan.staging) + (inner.kernel("sm_90").config.split_k > 1)
    assert all(h == "gett::wait_for_prior_kernels();" for h in heads), heads


@pytest.mark.parametrize("cid,dtype", [
    (19, "f16"), (13, "f16"), (14, "f16"), (14, "f32"),   # 55-121 MB: 18-40 us at 3 TB/s
    (12, "f16"),                                          # 271 GFLOP
])
def test_long_plans_chain_their_kernels(cid, dtype):
    from gett.launch import worth_chaining
    c = select([cid])[0]
    mk = lambda t: D(c.shape(t), c.strides(t), dtype)
    plan = gett.plan_contraction(mk("A"), c.modes("A"), mk("B"), c.modes("B"), mk("C"), c.modes("C"), beta=0,
                                 device_arch="sm_90")
    assert worth_chaining(plan)


def test_small_plans_do_not_chain_their_kernels():
    """64 x 1024 x 64 in f32: 0.5 MB, 8 MFLOP; a call of its split-K chain cost 5 us more chained (H100)."""
    from gett.launch import worth_chaining
    plan = gett.plan_contraction(D((64, 1024), (1024, 1), "f32"), "ik", D((1024, 64), (64, 1), "f32"), "kj",
                                 D((64, 64), (64, 1), "f32"), "ij", beta=0, device_arch="sm_90")
    assert not worth_chaining(plan)


def test_a_launch_passes_its_pointers_then_its_by_value_arguments(monkeypatch):
    """cuLaunchKernelEx's kernelParams: one address a kernel argument, where that argument's bytes lie: the
    device addresses from the launch's own slots, in order, then each ByValue's bytes; the stream in the
    launch configuration. The driver is a stand-in that reads what a launch hands it."""
    import numpy as np

    from gett import dependent_launch
    seen = []

    def driver(config, function, params, extra):
        cfg = ctypes.cast(config, ctypes.POINTER(_Config)).contents
        pointers = [ctypes.c_uint64.from_address(params[i]).value for i in range(3)]
        values = [ctypes.c_float.from_address(params[i]).value for i in (3, 4)]
        seen.append((function, cfg.stream, tuple(cfg.grid), cfg.num_attrs, pointers, values))
        return 0
    monkeypatch.setattr(dependent_launch, "_launch_kernel_ex", lambda: driver)
    launch = dependent_launch.DependentLaunch(0xF00, (7, 1, 1), (128, 1, 1), 0, 3, 2)
    alpha, beta = (dependent_launch.ByValue(np.full(1, v, np.float32)) for v in (2.5, -1.0))
    launch(0x51, (0x1000, 0x2000, 0), (alpha, beta))
    launch(0x52, (0x3000, 0x4000, 0x5000), (beta, alpha))
    assert seen == [(0xF00, 0x51, (7, 1, 1), 1, [0x1000, 0x2000, 0], [2.5, -1.0]),
                    (0xF00, 0x52, (7, 1, 1), 1, [0x3000, 0x4000, 0x5000], [-1.0, 2.5])]
