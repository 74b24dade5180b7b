"""The cached call paths of gett.einsum and gett.contract, on the CPU through a fake CuPy (tests/fake_cupy):
a repeated call takes the short path and launches on its own arrays; any change a plan depends on —
shape, strides, dtype, pointer alignment, device — is caught (a new plan, or the error of a full check);
the launch goes to the arrays' device; nothing is shared between calls that should not be.

The kernels are compiled (NVRTC, no GPU); only their launches are faked, so these run in CI."""
import sys
import threading
from types import SimpleNamespace

import fake_cupy
import numpy as np
import pytest
import small_staged
from fake_cupy import launched_pointers

import gett


@pytest.fixture
def cupy():
    """The fake CuPy module, with its recorded launches at ``cupy.state.launches``."""
    with fake_cupy.installed() as state:
        module = sys.modules["cupy"]
        module.state = state
        yield module


def _accepted_calls():
    return sys.modules["gett.contract"]._ACCEPTED.info()


def test_einsum_repeated_calls_launch_on_their_own_arrays(cupy):
    for k in range(3):
        A, B, out = cupy.ndarray((16, 8)), cupy.ndarray((8, 4)), cupy.ndarray((16, 4))
        assert gett.einsum("ij,jk->ik", A, B, out=out) is out
        assert launched_pointers(cupy.state.launches[-1]) == (A.data.ptr, B.data.ptr, out.data.ptr, out.data.ptr)
    info = gett.cache_info()
    assert (info.hits, info.misses, info.size) == (2, 1, 1)
    assert len(cupy.state.launches) == 3


def test_einsum_results_are_new_arrays(cupy):
    A, B = cupy.ndarray((16, 8)), cupy.ndarray((8, 4))
    first, second = gett.einsum("ij,jk->ik", A, B), gett.einsum("ij,jk->ik", A, B)
    assert first is not second and first.data.ptr != second.data.ptr
    assert (second.shape, second.dtype) == ((16, 4), np.float32)
    assert launched_pointers(cupy.state.launches[-1])[2:] == (second.data.ptr, second.data.ptr)


@pytest.mark.parametrize("change", ["shape", "strides", "dtype", "alignment", "out strides"])
def test_einsum_signature_changes_are_planned_anew(cupy, change):
    A, B, out = cupy.ndarray((16, 8)), cupy.ndarray((8, 4)), cupy.ndarray((16, 4))
    gett.einsum("ij,jk->ik", A, B, out=out)
    if change == "shape":
        A, out = cupy.ndarray((12, 8)), cupy.ndarray((12, 4))
    elif change == "strides":
        A = cupy.ndarray((8, 16)).view_as((16, 8), (4, 64))            # a transposed view
    elif change == "dtype":
        A, B, out = (cupy.ndarray(x.shape, np.float64) for x in (A, B, out))
    elif change == "alignment":
        A = cupy.ndarray((17, 8)).view_as((16, 8), (32, 4), offset=4)   # 4-byte aligned
    else:
        out = cupy.ndarray((4, 16)).view_as((16, 4), (4, 64))
    gett.einsum("ij,jk->ik", A, B, out=out)
    info = gett.cache_info()
    assert (info.hits, info.misses) == (0, 2)
    assert launched_pointers(cupy.state.launches[-1]) == (A.data.ptr, B.data.ptr, out.data.ptr, out.data.ptr)


def test_contract_memo_checks_other_arrays_in_full(cupy):
    A, B, C = cupy.ndarray((16, 8)), cupy.ndarray((8, 4)), cupy.ndarray((16, 4))
    plan = gett.plan_contraction(A, "ij", B, "jk", C, "ik")
    for _ in range(3):
        D = cupy.ndarray((16, 4))
        assert gett.contract(plan, 1.0, A, B, 0.0, C, D) is D
        assert launched_pointers(cupy.state.launches[-1]) == (A.data.ptr, B.data.ptr, C.data.ptr, D.data.ptr)
    assert _accepted_calls().hits == 2
    bad = {
        "dtype": (A, B, C, cupy.ndarray((16, 4), np.float64)),
        "strides": (A, B, C, cupy.ndarray((16, 8)).view_as((16, 4), (32, 8))),
        "shape": (cupy.ndarray((12, 8)), B, C, C),
        "aligned": (cupy.ndarray((17, 8)).view_as((16, 8), (32, 4), offset=4), B, C, C),
    }
    launches = len(cupy.state.launches)
    for message, (a, b, c, d) in bad.items():
        with pytest.raises(gett.PlanMismatchError, match=message):
            gett.contract(plan, 1.0, a, b, 0.0, c, d)
    assert len(cupy.state.launches) == launches   # nothing launched


def test_clear_cache_forgets_checked_contract_calls(cupy):
    """The memo of checked calls holds plans alive: gett.clear_cache() lets them go."""
    import gc
    import weakref
    A, B, C = cupy.ndarray((16, 8)), cupy.ndarray((8, 4)), cupy.ndarray((16, 4))
    plan = gett.plan_contraction(A, "ij", B, "jk", C, "ik")
    gett.contract(plan, 1.0, A, B, 0.0, C, cupy.ndarray((16, 4)))
    assert _accepted_calls().size >= 1
    ref = weakref.ref(plan)
    del plan
    gett.clear_cache()
    gc.collect()
    assert _accepted_calls().size == 0 and ref() is None


def test_contract_arrays_on_another_device_are_refused(cupy):
    cupy.state.count = 2
    A, B, C = cupy.ndarray((16, 8)), cupy.ndarray((8, 4)), cupy.ndarray((16, 4))
    plan = gett.plan_contraction(A, "ij", B, "jk", C, "ik")
    gett.contract(plan, 1.0, A, B, 0.0, C)
    with pytest.raises(gett.DeviceError, match="one device"):
        gett.contract(plan, 1.0, A, B, 0.0, C, cupy.ndarray((16, 4), device=1))


def test_launch_goes_to_the_arrays_device(cupy):
    cupy.state.count = 2
    with cupy.cuda.Device(1):
        A, B = cupy.ndarray((16, 8)), cupy.ndarray((8, 4))
    for _ in range(2):   # planned, then cached
        result = gett.einsum("ij,jk->ik", A, B)   # the current device is 0
        assert cupy.state.launches[-1][1] == 1 and result.device.id == 1
    assert cupy.state.device == 0


def test_one_device_is_never_asked_for(cupy, monkeypatch):
    A, B, out = cupy.ndarray((16, 8)), cupy.ndarray((8, 4)), cupy.ndarray((16, 4))
    plan = gett.plan_contraction(A, "ij", B, "jk", out, "ik")
    gett.einsum("ij,jk->ik", A, B, out=out)
    gett.contract(plan, 1.0, A, B, 0.0, out)

    def no_device_query():
        raise AssertionError("the current device was asked for on a machine with one device")
    monkeypatch.setattr(cupy.cuda.runtime, "getDevice", no_device_query)
    gett.einsum("ij,jk->ik", A, B, out=out)
    gett.einsum("ij,jk->ik", A, B)
    gett.contract(plan, 1.0, A, B, 0.0, out)


def test_alpha_and_beta_go_by_value(cupy):
    A, B, C = cupy.ndarray((16, 8)), cupy.ndarray((8, 4)), cupy.ndarray((16, 4))
    plan = gett.plan_contraction(A, "ij", B, "jk", C, "ik")
    for alpha, beta in [(1.0, 0.0), (2.5, -1), (2.5, -1), (np.float64(0.5), np.array(3.0)), (np.array(4.0), 1)]:
        gett.contract(plan, alpha, A, B, beta, C)
        args = cupy.state.launches[-1][4]
        assert (args[5].value.tolist(), args[6].value.tolist()) == ([float(alpha)], [float(beta)])
        assert args[5].value.dtype == np.float32


def test_split_k_launches_the_kernel_then_the_reduction_on_one_scratch(cupy):
    from gett.codegen import REDUCE_NAME
    from gett.config import KernelConfig
    A, B, C, D = cupy.ndarray((64, 512)), cupy.ndarray((512, 32)), cupy.ndarray((64, 32)), cupy.ndarray((64, 32))
    plan = gett.plan_contraction(A, "ik", B, "kj", C, "ij", D=D,
                                 config=KernelConfig("simt", 64, 64, 32, 3, tm=4, tn=4, split_k=4))
    requested, alloc = [], cupy.cuda.alloc

    def recording(nbytes):
        requested.append(nbytes)
        return alloc(nbytes)
    cupy.cuda.alloc = recording
    for _ in range(2):
        requested.clear()
        gett.contract(plan, 1.0, A, B, 0.5, C, D)
        kernel, reduce = cupy.state.launches[-2:]
        assert kernel[0] != REDUCE_NAME and reduce[0] == REDUCE_NAME
        partials = kernel[4][4].value
        assert partials != 0 and reduce[4][0].value == partials   # the partial sums the kernel wrote
        assert launched_pointers(kernel) == (A.data.ptr, B.data.ptr, C.data.ptr, D.data.ptr)
        assert (reduce[4][1], reduce[4][2]) == (C, D)   # the reduction reads C and writes D
        assert requested == [4 * 64 * 32 * 4]   # every split's f32 sums, in one allocation


def test_a_staged_split_k_call_takes_one_scratch_for_its_copy_and_partials(cupy, monkeypatch):
    """One allocation (one capture query of the stream) a call: A's staged copy, then the partial sums."""
    from gett.config import KernelConfig
    from gett.launch import SCRATCH_ALIGN
    A, B, D = small_staged.layouts(*(cupy.ndarray(s, np.float16) for s in small_staged.SHAPES),
                                   lambda x, axes: x.view_as([x.shape[i] for i in axes], [x.strides[i] for i in axes]))
    plan = gett.plan_contraction(A, "kmj", B, "jkn", D, "mn", beta=0, staging=True,
                                 config=KernelConfig("simt", 64, 64, 32, 3, tm=4, tn=4, split_k=4))
    stream, asked, requested, alloc = cupy.cuda.Stream(0x33), [], [], cupy.cuda.alloc
    monkeypatch.setattr(cupy.cuda, "get_current_stream", lambda: stream)
    monkeypatch.setattr(cupy.cuda.runtime, "streamIsCapturing", lambda s: asked.append(s) or False, raising=False)

    def recording(nbytes):
        memory = alloc(nbytes)
        requested.append((nbytes, memory.ptr))
        return memory
    monkeypatch.setattr(cupy.cuda, "alloc", recording)
    gett.contract(plan, 1.0, A, B, 0.0, D, D)
    copy, kernel, reduce = cupy.state.launches[-3:]
    copied = A.size * A.itemsize
    partials_at = -(-copied // SCRATCH_ALIGN) * SCRATCH_ALIGN
    [(nbytes, scratch)] = requested
    assert asked == [0x33] and nbytes == partials_at + 4 * D.size * 4
    assert launched_pointers(copy)[:2] == (A.data.ptr, scratch)   # A copied to the scratch's start
    assert launched_pointers(kernel)[:2] == (scratch, B.data.ptr)   # the kernel reads the copy
    assert kernel[4][4].value == reduce[4][0].value == scratch + partials_at   # the partials after it


def test_an_exchanged_call_gives_the_kernel_b_first_and_a_copy(cupy):
    """A small A shared by many columns of B (gett.staging.exchanges_operands), a-major: A is copied
    K-major into the call's scratch, then the kernel takes B as its first operand and the copy second."""
    A = cupy.ndarray((16, 128), np.float16).view_as((128, 16), (2, 256))   # a d, a fastest
    B = cupy.ndarray((128, 16, 256), np.float16).view_as((256, 16, 128), (2, 512, 8192))   # b d c
    D = cupy.ndarray((128, 256, 128), np.float16).view_as((128, 256, 128), (2, 256, 65536))   # a b c
    plan = gett.plan_contraction(A, "ad", B, "bdc", D, "abc", beta=0)
    assert plan.exchanged and [st.tensor for st in plan.staging] == ["A"]
    gett.contract(plan, 1.0, A, B, 0.0, D, D)
    copy, kernel = cupy.state.launches[-2:]
    scratch = launched_pointers(copy)[1]
    assert launched_pointers(copy)[0] == A.data.ptr
    assert launched_pointers(kernel) == (B.data.ptr, scratch, D.data.ptr, D.data.ptr)


def test_threads_launch_on_their_own_arrays(cupy):
    A0, B0, out0 = cupy.ndarray((16, 8)), cupy.ndarray((8, 4)), cupy.ndarray((16, 4))
    gett.einsum("ij,jk->ik", A0, B0, out=out0)   # compile outside the threads
    arrays = [(cupy.ndarray((16, 8)), cupy.ndarray((8, 4)), cupy.ndarray((16, 4))) for _ in range(8)]
    mine, errors = {}, []
    record = fake_cupy._Function.__call__

    def checking(self, grid, block, args, shared_mem=0, stream=None):
        A, B, out = mine[threading.get_ident()]
        if tuple(x.data.ptr for x in args[:4]) != (A.data.ptr, B.data.ptr, out.data.ptr, out.data.ptr):
            errors.append(AssertionError("a launch on another thread's arrays"))

    def work(i):
        mine[threading.get_ident()] = arrays[i]
        try:
            for _ in range(50):
                gett.einsum("ij,jk->ik", *arrays[i][:2], out=arrays[i][2])
        except Exception as e:   # surfaced below
            errors.append(e)
    fake_cupy._Function.__call__ = checking
    try:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        fake_cupy._Function.__call__ = record
    assert not errors
    info = gett.cache_info()
    assert (info.size, info.hits) == (1, 400)


def kernel_stub(smem, threads):
    """What the launcher reads of a compiled kernel to size its CTAs' shared memory."""
    return SimpleNamespace(shared_bytes=smem, threads=threads)


def test_shared_carveout_fits_the_ctas_registers_allow_and_no_more():
    """One 128x256 wgmma CTA (196 KB, 256 threads of 249 registers) keeps the rest of L1 as cache;
    four small CTAs get room for all four; unknown registers take all of L1."""
    from gett.launch import shared_carveout
    assert shared_carveout(kernel_stub(196608, 256), 249) == 85          # (192 + 1) KB of 228 KB
    assert shared_carveout(kernel_stub(50 * 1024, 128), 106) == 90       # 4 CTAs by registers and by memory
    assert shared_carveout(kernel_stub(50 * 1024, 128), 200) == 45       # registers allow 2 (2 x 51 KB)
    assert shared_carveout(kernel_stub(50 * 1024, 128), -1) == 100


def test_resident_ctas_are_the_least_of_shared_memory_registers_and_threads():
    """A persistent kernel's grid is the SMs times this: #6's 256-thread box kernel (57 KB, 76 registers:
    3 by registers, 4 by shared memory), 40 KB with 40 registers (5 by shared memory, 6 by registers),
    1024 threads (2 by threads)."""
    from gett.launch import resident_ctas
    assert resident_ctas(kernel_stub(57104, 256), 76) == 3
    assert resident_ctas(kernel_stub(57104, 256), 48) == 4               # 228 KB // 57 KB
    assert resident_ctas(kernel_stub(40 * 1024, 256), 40) == 5           # 228 // 41 KB; registers allow 6
    assert resident_ctas(kernel_stub(1024, 1024), 32) == 2               # 2048 threads an SM
    assert resident_ctas(kernel_stub(1024, 256), -1) == 8                # registers unknown: not counted
    assert resident_ctas(kernel_stub(300 * 1024, 128), 32) == 1          # never fewer than one


def test_the_carveout_follows_the_loaded_function_registers_not_the_compile_report(cupy):
    """ptxas's report is missing (-1) when NVRTC is answered from the driver's compute cache; the
    carveout then comes from the registers the loaded function reports, not from a guess of 100%."""
    import dataclasses

    from gett.config import KernelConfig
    from gett.launch import Launcher
    a, b, c = (cupy.ndarray(shape, np.float16) for shape in ((1024, 512), (512, 1024), (1024, 1024)))
    plan = gett.plan_contraction(a, "mk", b, "kn", c, "mn", config=KernelConfig("mma16", 128, 256, 32, 4, wm=64, wn=64))
    kernel = plan.kernel()
    assert kernel.shared_bytes > 48 * 1024
    blind = dataclasses.replace(kernel, report=dataclasses.replace(kernel.report, registers=-1))
    plan._compiled[kernel.report.arch] = blind
    launcher = Launcher(plan, 0, "cupy")
    assert launcher._fn.preferred_shared_memory_carveout < 100
