"""CPU tests of the plan database (gett.plan_db) and the CPU side of the tuner: round trip, user over shipped,
a GPU model's shipped database over its architecture's, corrupt files ignored with a warning, concurrent
writers, atomic writes, the near-identical-shape rule, bf16 plans borrowing their f16 twin's entry, key stability across processes, build_kernel's use of a hit, and
behaviour without a GPU."""
import json
import math
import multiprocessing
import os
import subprocess
import sys
import textwrap
import warnings
from dataclasses import asdict, replace
from pathlib import Path

import pytest

import gett
from gett import plan_db, tuner
from gett.config import KernelConfig, default_config, split_k_for
from gett.kernel import build_kernel

ARCH = "sm_90"
ODD = KernelConfig("mma16", 64, 64, 32, 2, wm=32, wn=32, group_m=4)   # no heuristic picks this


def plan_of(m, n, k, dtype="f16", out="f16"):
    d = gett.TensorDescriptor
    return gett.plan_contraction(d((m, k), None, dtype), "mk", d((k, n), None, dtype), "kn",
                                 d((m, n), None, out), "mn")


def has_gpu():
    try:
        gett.kernel.current_arch()
        return True
    except gett.DeviceError:
        return False


@pytest.fixture(autouse=True)
def private_db(tmp_path, monkeypatch):
    """A fresh user database and an empty shipped folder per test."""
    monkeypatch.setenv("GETT_CACHE_DIR", str(tmp_path / "cache"))
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    monkeypatch.setattr(plan_db, "shipped_dir", lambda: shipped)
    plan_db.clear_memory_cache()
    yield
    plan_db.clear_memory_cache()


def user_file() -> Path:
    return plan_db.user_path(ARCH)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


# ---------------------------------------------------------------------------------------------------------

def test_round_trip():
    plan = plan_of(256, 192, 128)
    assert plan_db.lookup(plan, ARCH) is None
    plan_db.record(plan, ARCH, ODD, 0.125)
    assert plan_db.lookup(plan, ARCH) == ODD            # the file changed: re-read without clearing
    plan_db.clear_memory_cache()
    assert plan_db.lookup(plan, ARCH, exact=True) == ODD
    entry = json.loads(user_file().read_text())["entries"][plan_db.plan_key(plan, ARCH)]
    assert entry["ms"] == 0.125 and entry["gett"] == gett.__version__ and entry["gemm"] == [256, 192, 128, 1]


@pytest.mark.parametrize("target", ["sm_90a", "90", "compute_90"])
def test_a_compile_target_of_the_gpu_finds_its_entries(target):
    """The database describes the GPU: a plan made for sm_90a (wgmma's target) finds sm_90's entries, and
    what the tuner records for it lands in sm_90's file."""
    plan = plan_of(256, 192, 128)
    plan_db.record(plan, target, ODD, 0.5)
    assert plan_db.user_path(target) == user_file()
    assert plan_db.lookup(plan, ARCH) == ODD and plan_db.lookup(plan, target) == ODD
    assert plan_db.plan_key(plan, target) == plan_db.plan_key(plan, ARCH)
    assert plan_db.lookup(plan, "sm_80") is None


def test_unchanged_file_is_parsed_once(monkeypatch):
    plan = plan_of(256, 192, 128)
    plan_db.record(plan, ARCH, ODD, 1.0)
    reads = []
    real = plan_db._read
    monkeypatch.setattr(plan_db, "_read", lambda path: reads.append(path) or real(path))
    for _ in range(3):
        assert plan_db.lookup(plan, ARCH) == ODD
    assert reads == [user_file()]


def test_user_entry_overrides_shipped():
    plan = plan_of(256, 192, 128)
    shipped_cfg = KernelConfig("mma16", 128, 64, 32, 3, wm=64, wn=32)
    plan_db.record(plan, ARCH, shipped_cfg, 2.0)
    user_file().replace(plan_db.shipped_path(ARCH))      # what was recorded becomes the shipped file
    assert plan_db.lookup(plan, ARCH) == shipped_cfg
    plan_db.record(plan, ARCH, ODD, 1.0)
    assert plan_db.lookup(plan, ARCH) == ODD


@pytest.mark.parametrize("name, model", [
    ("NVIDIA H200", "h200"), ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H100 PCIe", "h100"),
    ("NVIDIA GH200 480GB", "gh200"), ("Tesla V100-SXM2-16GB", "v100"), ("NVIDIA A100-SXM4-80GB", "a100"),
    ("NVIDIA GeForce RTX 4090", "4090"), ("NVIDIA Graphics Device", None)])
def test_model_of_a_device_name(name, model):
    assert plan_db.model_of(name) == model


def test_a_models_database_goes_over_its_architectures():
    """On a GPU of a model with a database of its own (sm_90-h200.json), its entries win over the
    architecture's (sm_90.json) and the architecture's fill in the rest; another model, or none (compiled
    ahead without a device), reads the architecture's alone; the user's file wins over both."""
    mine, other = plan_of(256, 192, 128), plan_of(512, 512, 128)
    arch_cfg = KernelConfig("mma16", 128, 64, 32, 3, wm=64, wn=32)
    plan_db.record(mine, ARCH, arch_cfg, 2.0)
    plan_db.record(other, ARCH, arch_cfg, 2.0)
    user_file().replace(plan_db.shipped_path(ARCH))
    plan_db.record(mine, ARCH, ODD, 1.0)
    user_file().replace(plan_db.shipped_path(ARCH, "h200"))
    assert plan_db.shipped_path(ARCH, "h200").name == "sm_90-h200.json"
    assert plan_db.lookup(mine, ARCH, model="h200") == ODD
    assert plan_db.lookup(other, ARCH, model="h200") == arch_cfg
    assert plan_db.lookup(mine, ARCH, model="h100") == arch_cfg and plan_db.lookup(mine, ARCH) == arch_cfg
    assert plan_db.lookup(mine, "sm_90a", exact=True, model="h200") == ODD
    user_cfg = KernelConfig("mma16", 64, 128, 32, 3, wm=32, wn=64)
    plan_db.record(mine, ARCH, user_cfg, 0.5)
    assert plan_db.lookup(mine, ARCH, model="h200") == user_cfg


def test_lookup_in_a_given_database_leaves_the_files_alone():
    """``lookup(data=...)`` answers from that json object alone (the files' entries are not in it), by the
    same rules (a near-identical shape borrows), and a bad object is ignored with a warning."""
    plan, near = plan_of(256, 192, 128), plan_of(300, 192, 128)
    plan_db.record(plan, ARCH, ODD, 1.0)
    other = KernelConfig("mma16", 128, 64, 32, 3, wm=64, wn=32)
    data = json.loads(user_file().read_text())
    data["entries"][plan_db.plan_key(plan, ARCH)]["config"] = asdict(other)
    assert plan_db.lookup(plan, ARCH, data=data) == other
    assert plan_db.lookup(near, ARCH, data=data) == other and plan_db.lookup(near, ARCH, data=data, exact=True) is None
    assert plan_db.lookup(plan, ARCH) == ODD                                  # the files' answer is unchanged
    assert plan_db.lookup(plan, ARCH, data={"version": 1, "entries": {}}) is None
    with pytest.warns(UserWarning, match="ignoring the plan database given to lookup"):
        assert plan_db.lookup(plan, ARCH, data={"entries": []}) is None


@pytest.mark.parametrize("text", [
    "{not json",
    json.dumps([1, 2]),
    json.dumps({"version": 1, "entries": []}),
    json.dumps({"version": 99, "entries": {}}),
])
def test_corrupt_file_is_ignored_with_a_warning(text):
    write(user_file(), text)
    with pytest.warns(UserWarning, match="ignoring the plan database"):
        assert plan_db.lookup(plan_of(256, 192, 128), ARCH) is None


@pytest.mark.parametrize("change", [
    {"math": "wmma"},                 # unknown math path
    {"bm": 48},                       # warp tile does not divide the tile
    {"stages": 1},
    {"bm": "64"},                     # wrong type
    {"ws": 1},                        # a producer warpgroup is on or off
    {"ws": True},                     # ... and only on the wgmma path
    {"swap": 0},                      # swapped operands are on or off
    {"swap": True},                   # ... and only on the wgmma path
    {"colour": 3},                    # unknown field
])
def test_invalid_config_is_ignored_with_a_warning(change):
    plan = plan_of(256, 192, 128)
    plan_db.record(plan, ARCH, ODD, 1.0)
    data = json.loads(user_file().read_text())
    for entry in data["entries"].values():
        entry["config"].update(change)
    write(user_file(), json.dumps(data))
    with pytest.warns(UserWarning, match="ignoring entry"):
        assert plan_db.lookup(plan, ARCH) is None
    with pytest.warns(UserWarning):                        # recording over it works, dropping the bad entry
        plan_db.record(plan_of(64, 64, 64), ARCH, ODD, 1.0)
    assert len(json.loads(user_file().read_text())["entries"]) == 1


def _record_many(worker: int) -> None:
    for i in range(25):
        plan_db.record(plan_of(100 * worker + i + 1, 64, 64), ARCH, ODD, float(i))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_concurrent_writers_keep_every_entry():
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_record_many, args=(w,)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * 4
    data = json.loads(user_file().read_text())
    assert len(data["entries"]) == 100
    for w in range(4):
        for i in range(25):
            assert plan_db.lookup(plan_of(100 * w + i + 1, 64, 64), ARCH, exact=True) == ODD


def test_writes_are_atomic_and_leave_no_temp_files(monkeypatch):
    plan_db.record(plan_of(256, 192, 128), ARCH, ODD, 1.0)
    before = user_file().read_bytes()

    def fail(src, dst):
        raise OSError("disk full")
    with monkeypatch.context() as patch, pytest.raises(OSError, match="disk full"):
        patch.setattr(os, "replace", fail)
        plan_db.record(plan_of(64, 64, 64), ARCH, ODD, 1.0)
    assert user_file().read_bytes() == before
    assert sorted(p.name for p in user_file().parent.iterdir()) == ["sm_90.json", "sm_90.json.lock"]


def test_a_plan_that_reads_c_takes_no_producer_over_several_tiles_tuned_without():
    """An entry of a producer over several tiles (persistent, ws) tuned by a plan that did not read C serves
    plans with beta = 0 or no hint, not one that reads C (the heuristic never gives it that tile), nor through
    its family; other entries serve every plan, and an entry tuned while reading C serves such plans."""
    d = gett.TensorDescriptor

    def plan(beta, m=4000):
        return gett.plan_contraction(d((m, 296), None, "f16"), "mk", d((296, 2096), None, "f16"), "kn",
                                     d((m, 2096), None, "f16"), "mn", beta=beta)
    producer = KernelConfig("wgmma", 128, 160, 64, 4, ws=True, persistent=True)
    plan_db.record(plan(0.0), ARCH, producer, 1.0)
    assert plan_db.lookup(plan(0.0), ARCH) == producer and plan_db.lookup(plan(None), ARCH) == producer
    assert plan_db.lookup(plan(1.0), ARCH) is None and plan_db.lookup(plan(1.0, 5000), ARCH) is None
    assert "reads_c" not in json.loads(user_file().read_text())["entries"][plan_db.plan_key(plan(0.0), ARCH)]
    plan_db.record(plan(0.0), ARCH, ODD, 1.0)
    assert plan_db.lookup(plan(1.0), ARCH) == ODD
    plan_db.record(plan(1.0), ARCH, producer, 1.0)   # tuned while reading C (the same key: beta is not in it)
    assert plan_db.lookup(plan(1.0), ARCH) == producer
    assert json.loads(user_file().read_text())["entries"][plan_db.plan_key(plan(1.0), ARCH)]["reads_c"] is True


def test_a_plan_that_reads_c_takes_no_box_tiles_over_several_tiles_tuned_without():
    """Likewise an entry of mma.sync box tiles over several tiles (persistent without a producer, TCCG
    #6/#8's 768 rows: one CTA an SM), tuned without reading C: a plan that reads C takes the heuristic's."""
    d = gett.TensorDescriptor

    def plan(beta):   # TCCG #6 at a smaller size, column-major
        ext = dict(zip("abcdef", (48, 41, 24, 8, 48, 32)))
        desc = {}
        for t, modes in (("A", "efbad"), ("B", "cf"), ("C", "abcde")):
            shape = tuple(ext[x] for x in modes)
            desc[t] = d(shape, tuple(math.prod(shape[:i]) for i in range(len(shape))), "f16")
        return gett.plan_contraction(desc["A"], "efbad", desc["B"], "cf", desc["C"], "abcde", beta=beta)
    boxes = KernelConfig("mma16", 768, 32, 32, 2, wm=32, wn=32, persistent=True)
    plan_db.record(plan(0.0), ARCH, boxes, 1.0)
    assert plan_db.lookup(plan(0.0), ARCH) == boxes and plan_db.lookup(plan(None), ARCH) == boxes
    assert plan_db.lookup(plan(1.0), ARCH) is None


def test_a_plan_that_reads_c_takes_no_wide_warps_over_one_k_tile_tuned_without():
    """Likewise an entry of mma.sync warps of 64 x 64 over all of K in one tile (TCCG #32's, K = 24) tuned
    without reading C: reading C takes them past their registers, so such a plan takes the heuristic's; the same
    warps over several K tiles serve it."""
    wide = KernelConfig("mma16", 128, 128, 32, 3, wm=64, wn=64)
    d = gett.TensorDescriptor

    def plan(beta, k=24):
        return gett.plan_contraction(d((6144, k), None, "f16"), "mk", d((k, 4096), None, "f16"), "kn",
                                     d((6144, 4096), None, "f16"), "mn", beta=beta)
    plan_db.record(plan(0.0), ARCH, wide, 1.0)
    assert plan_db.lookup(plan(0.0), ARCH) == wide and plan_db.lookup(plan(1.0), ARCH) is None
    plan_db.record(plan(0.0, k=200), ARCH, wide, 1.0)
    assert plan_db.lookup(plan(1.0, k=200), ARCH) == wide


def test_near_identical_shapes_reuse_an_entry_within_a_factor_of_2():
    plan_db.record(plan_of(256, 256, 256), ARCH, ODD, 1.0)
    assert plan_db.lookup(plan_of(300, 200, 400), ARCH) == ODD
    assert plan_db.lookup(plan_of(300, 200, 400), ARCH, exact=True) is None
    assert plan_db.lookup(plan_of(600, 256, 256), ARCH) is None       # M 2.3x larger
    assert plan_db.lookup(plan_of(256, 256, 100), ARCH) is None       # K 2.6x smaller
    assert plan_db.lookup(plan_of(256, 256, 256, "f32", "f32"), ARCH) is None   # another family
    closer = KernelConfig("mma16", 128, 128, 32, 3, wm=64, wn=32)
    plan_db.record(plan_of(400, 256, 256), ARCH, closer, 1.0)
    assert plan_db.lookup(plan_of(380, 256, 256), ARCH) == closer


def test_plan_with_ops_falls_back_to_the_entry_without_them():
    """Tuned for the plain contraction, the entry serves the same contraction with elementwise ops; an
    entry of its own still wins, and a custom semiring (another math path) never borrows one."""
    d = gett.TensorDescriptor

    def plan(**ops):
        return gett.plan_contraction(d((256, 128), None, "f16"), "mk", d((128, 192), None, "f16"), "kn",
                                     d((256, 192), None, "f16"), "mn", **ops)
    plain, leaky = plan(), plan(op_a=gett.ops.leaky_relu(0.01), op_c=gett.ops.relu)
    assert plan_db.plan_key(plain, ARCH) != plan_db.plan_key(leaky, ARCH)
    plan_db.record(plain, ARCH, ODD, 1.0)
    assert plan_db.lookup(leaky, ARCH) == ODD
    assert plan_db.lookup(leaky, ARCH, exact=True) is None
    assert plan_db.lookup(plan(op_ab=lambda a, b: a + b, reduce=(max, float("-inf"))), ARCH) is None
    own = KernelConfig("mma16", 128, 64, 32, 3, wm=32, wn=32)
    plan_db.record(leaky, ARCH, own, 1.0)
    assert plan_db.lookup(leaky, ARCH) == own
    plan_db.record(plan_of(400, 256, 256), ARCH, ODD, 1.0)   # near shapes: the plain family serves too
    near = gett.plan_contraction(d((380, 256), None, "f16"), "mk", d((256, 256), None, "f16"), "kn",
                                 d((380, 256), None, "f16"), "mn", op_b=gett.ops.relu)
    assert plan_db.lookup(near, ARCH) == ODD
    ws = KernelConfig("wgmma", 128, 256, 64, 4, ws=True)   # an op that does not keep 0 (no TMA): the producer would apply it alone
    plan_db.record(plain, ARCH, ws, 1.0)
    assert plan_db.lookup(plan(op_a=gett.ops.sigmoid), ARCH) == KernelConfig("wgmma", 128, 256, 64, 4)
    assert plan_db.lookup(plan(op_c=gett.ops.relu), ARCH) == ws
    # a split-K 128 x 256 producer tile becomes 128 x 128 with 4 stages (an op'd operand in registers)
    plan_db.record(plain, ARCH, KernelConfig("wgmma", 128, 256, 64, 3, split_k=4, ws=True), 1.0)
    assert plan_db.lookup(plan(op_b=gett.ops.sigmoid), ARCH) == KernelConfig("wgmma", 128, 128, 64, 4, split_k=4)
    # any other split-K producer tile takes 3 stages and the split of its CTAs (#13, #19); an unsplit one
    # keeps its depth (above)
    plan_db.record(plain, ARCH, KernelConfig("wgmma", 128, 80, 64, 6, split_k=6, ws=True), 1.0)
    three = KernelConfig("wgmma", 128, 80, 64, 3)
    assert plan_db.lookup(plan(op_b=gett.ops.sigmoid), ARCH) == replace(three, split_k=split_k_for(plain, three))
    # ... and one of 64 rows (one math warpgroup), split or not: 128 rows of its width, 3 stages, split as
    # the heuristic splits it
    for split in (6, 1):
        plan_db.record(plain, ARCH, KernelConfig("wgmma", 64, 160, 64, 8, split_k=split, ws=True), 1.0)
        tall = KernelConfig("wgmma", 128, 160, 64, 3)
        assert plan_db.lookup(plan(op_b=gett.ops.sigmoid), ARCH) == replace(tall, split_k=split_k_for(plain, tall))
    # an op that keeps 0 (ReLU) on a producer entry the TMA loads: the entry stands, the math threads apply it
    plan_db.record(plain, ARCH, ws, 1.0)
    assert plan_db.lookup(plan(op_a=gett.ops.relu), ARCH) == ws


def test_bf16_plan_borrows_its_f16_twins_entry():
    """A bf16 plan with no entry of its own (nor of its family) takes its f16 twin's, exact or near; an entry
    of its own or of its bf16 family wins; an exact look-up borrows nothing; an f16 plan never takes a bf16
    plan's entry, and an f32 plan no 16-bit one."""
    plan_db.record(plan_of(256, 256, 256), ARCH, ODD, 1.0)
    bf16 = plan_of(256, 256, 256, "bf16", "bf16")
    assert plan_db.plan_key(bf16, ARCH) != plan_db.plan_key(plan_of(256, 256, 256), ARCH)
    assert plan_db.plan_key(bf16, ARCH, twin=True) == plan_db.plan_key(plan_of(256, 256, 256), ARCH)
    assert plan_db.lookup(bf16, ARCH) == ODD
    assert plan_db.lookup(plan_of(300, 200, 400, "bf16", "bf16"), ARCH) == ODD   # the twin's family
    assert plan_db.lookup(plan_of(256, 256, 256, "bf16", "f32"), ARCH) is None     # no twin tuned
    assert plan_db.lookup(bf16, ARCH, exact=True) is None
    assert plan_db.lookup(plan_of(256, 256, 256, "f32", "f32"), ARCH) is None
    near = KernelConfig("mma16", 128, 64, 32, 3, wm=32, wn=32)
    plan_db.record(plan_of(300, 256, 256, "bf16", "bf16"), ARCH, near, 1.0)
    assert plan_db.lookup(bf16, ARCH) == near          # its own family before the twin
    own = KernelConfig("mma16", 128, 128, 32, 3, wm=64, wn=32)
    plan_db.record(bf16, ARCH, own, 1.0)
    assert plan_db.lookup(bf16, ARCH) == own
    assert plan_db.lookup(plan_of(256, 256, 256), ARCH) == ODD   # the f16 plan keeps its own
    plan_db.record(plan_of(2048, 2048, 2048, "bf16", "bf16"), ARCH, own, 1.0)
    assert plan_db.lookup(plan_of(2048, 2048, 2048), ARCH) is None   # and takes no bf16 entry


@pytest.mark.parametrize("k, adapted", [
    (312, KernelConfig("mma16", 128, 32, 64, 3, wm=32, wn=32)),   # 64 deep pads K no more than 32 deep
    (72, KernelConfig("mma16", 128, 32, 32, 4, wm=32, wn=32)),    # 32 deep pads less; K fits 3 stages: 4
    (200, KernelConfig("mma16", 128, 32, 32, 3, wm=32, wn=32)),   # 32 deep pads less; K needs 7 tiles
])
def test_borrowed_mma16_tile_is_adapted_to_an_op_on_a_load(k, adapted):
    """A 256-row, 64-deep mma.sync entry tuned without ops serves a plan with op_a as 128 rows (no
    register cap to spill under), 32 deep where that pads K less, one more stage where K fits the
    stages; a plan with an op on C only borrows it as it is."""
    d = gett.TensorDescriptor

    def plan(**ops):
        return gett.plan_contraction(d((4096, k), None, "f16"), "mk", d((k, 24), None, "f16"), "kn",
                                     d((4096, 24), None, "f16"), "mn", **ops)
    tuned = KernelConfig("mma16", 256, 32, 64, 3, wm=32, wn=32)
    plan_db.record(plan(), ARCH, tuned, 1.0)
    assert plan_db.lookup(plan(op_a=gett.ops.leaky_relu(0.01)), ARCH) == adapted
    assert plan_db.lookup(plan(op_c=gett.ops.relu), ARCH) == tuned


def test_key_is_stable_across_processes():
    script = textwrap.dedent("""
        import gett
        from gett import plan_db
        d = gett.TensorDescriptor
        p = gett.plan_contraction(d((256, 128), None, "f16"), "mk", d((128, 192), None, "f16"), "kn",
                                  d((256, 192), None, "f16"), "mn")
        print(plan_db.plan_key(p, "sm_90"), plan_db.family_key(p, "sm_90"))
    """)
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    plan = plan_of(256, 192, 128)
    assert out.stdout.split() == [plan_db.plan_key(plan, ARCH), plan_db.family_key(plan, ARCH)]


def test_build_kernel_uses_a_database_hit():
    plan = plan_of(256, 192, 128)
    assert default_config(plan) != ODD
    plan_db.record(plan, ARCH, ODD, 1.0)
    assert build_kernel(plan, ARCH).config == ODD
    explicit = KernelConfig("mma16", 64, 64, 32, 3, wm=32, wn=32)
    assert build_kernel(plan, ARCH, explicit).config == explicit   # an explicit config still wins
    d = gett.TensorDescriptor
    override = gett.plan_contraction(d((256, 128), None, "f16"), "mk", d((128, 192), None, "f16"), "kn",
                                     d((256, 192), None, "f16"), "mn", config=explicit)
    assert build_kernel(override, ARCH).config == explicit


def test_build_kernel_looks_in_the_current_devices_models_database(monkeypatch):
    """kernel_source asks the database for the current device's model (gett.kernel.current_model): here an
    H200's entry, where the architecture's file has another."""
    plan = plan_of(256, 192, 128)
    arch_cfg = KernelConfig("mma16", 128, 64, 32, 3, wm=64, wn=32)
    plan_db.record(plan, ARCH, arch_cfg, 2.0)
    user_file().replace(plan_db.shipped_path(ARCH))
    plan_db.record(plan, ARCH, ODD, 1.0)
    user_file().replace(plan_db.shipped_path(ARCH, "h200"))
    monkeypatch.setattr(gett.kernel, "current_model", lambda arch: "h200")
    assert build_kernel(plan, ARCH).config == ODD
    monkeypatch.setattr(gett.kernel, "current_model", lambda arch: None)
    assert build_kernel(plan, ARCH).config == arch_cfg


@pytest.mark.skipif(has_gpu(), reason="the device's own model is asked for on a GPU")
def test_without_a_device_there_is_no_current_model():
    assert gett.kernel.current_model(ARCH) is None


def test_candidates_are_valid_and_compile_in_parallel():
    plan = plan_of(96, 80, 64)
    configs = tuner.candidate_configs(plan, ARCH)
    assert configs[0] == default_config(plan) and len(set(configs)) == len(configs) <= tuner.MAX_CANDIDATES
    for cfg in configs:
        cfg.validate()
    pool, futures = tuner._start_builds(plan, ARCH, configs[1:3])   # spawned workers, sources only
    for f in futures:
        f.result(timeout=120)
    pool.shutdown()
    assert list(futures.values()) == configs[1:3]
    from gett import kernel_cache
    kernel_cache.clear_memory_cache()   # the workers' cubins must be found on disk, not in this process
    assert all(build_kernel(plan, ARCH, cfg).report.from_cache for cfg in configs[1:3])


def test_simt_candidates_have_lanes_along_n_and_m():
    """SIMT candidates come with a warp's lanes along N and along M (KernelConfig.lanes_m): which one
    stores D without bank conflicts depends on where D's stride-1 mode is (f32 TCCG #40: M)."""
    from tccg_suite.suite import select
    c = select([40])[0]
    d = {t: gett.TensorDescriptor(c.shape(t), c.strides(t), "f32") for t in "ABC"}
    plan = gett.plan_contraction(d["A"], c.modes("A"), d["B"], c.modes("B"), d["C"], c.modes("C"), beta=0.0)
    configs = tuner.candidate_configs(plan, ARCH)
    assert configs[0].lanes_m and {c.lanes_m for c in configs if c.math == "simt"} == {False, True}


def test_persistent_box_tile_candidates_fit_sm_90():
    """A tile over several CTAs whose A tile is a TMA box (mma.sync, ``persistent``) is checked against
    the architecture it is for: without it no TMA box exists and the candidate used to be dropped (f16
    TCCG #7's 768-row tile was never timed by tune_tccg)."""
    from tccg_suite.suite import select
    c = select([7])[0]
    d = {t: gett.TensorDescriptor(c.shape(t), c.strides(t), "f16") for t in "ABC"}
    plan = gett.plan_contraction(d["A"], c.modes("A"), d["B"], c.modes("B"), d["C"], c.modes("C"), beta=0.0)
    tall = KernelConfig("mma16", 768, 32, 48, 2, wm=32, wn=32, persistent=True)
    assert tuner._fits(plan, "sm_90", tall)


def test_candidates_include_taller_memory_bound_tiles():
    """With N <= 32 and a long M (the heuristic's 256 x 32 tile, or 576 x 32), the other tall row counts of
    256, 288, 384, 576 and 768 are candidates: they give box-tiled M modes of extents like 72 and 312 longer
    runs (#1's shipped entry is one); on sm_90 CTAs over several tiles too, where A's tile is a TMA box
    (f16 #7; its 768-row tile lies past the 32 nearest: tune_tccg --candidates brings it in)."""
    plan = plan_of(97344, 24, 312)
    assert (default_config(plan).bm, default_config(plan).bn) == (256, 32)
    tall = {(c.bm, c.bk) for c in tuner.candidate_configs(plan, ARCH) if c.math == "mma16" and c.bm > 256}
    assert tall == {(288, 32), (288, 64), (384, 32), (384, 64), (576, 32), (768, 32)}   # x 64: shared memory
    assert not any(c.bm > 256 for c in tuner.candidate_configs(plan_of(256, 192, 128), ARCH))
    from tccg_suite.suite import select
    c = select([3])[0]   # #3: the heuristic's tile has 576 rows; the shorter ones stay candidates
    d = {t: gett.TensorDescriptor(c.shape(t), c.strides(t), "f16") for t in "ABC"}
    plan3 = gett.plan_contraction(d["A"], c.modes("A"), d["B"], c.modes("B"), d["C"], c.modes("C"))
    assert default_config(plan3).bm == 576
    assert {256, 288, 384} <= {cfg.bm for cfg in tuner.candidate_configs(plan3, ARCH) if cfg.math == "mma16"}
    c = select([7])[0]
    d = {t: gett.TensorDescriptor(c.shape(t), c.strides(t), "f16") for t in "ABC"}
    plan7 = gett.plan_contraction(d["A"], c.modes("A"), d["B"], c.modes("B"), d["C"], c.modes("C"), beta=0.0)
    assert {(c.bm, c.stages) for c in tuner.candidate_configs(plan7, ARCH) if c.persistent} >= {(288, 2), (384, 3)}


def test_candidates_reach_across_math_paths():
    """A wgmma tile is as near an mma.sync heuristic as its tile sizes and stages make it (wgmma has no
    warp tile: comparing it as 0 put every wgmma tile behind all mma.sync ones)."""
    base = KernelConfig("mma16", 96, 128, 32, 4, wm=32, wn=64)
    wgmma = KernelConfig("wgmma", 128, 128, 64, 3)
    near = tuner._closeness(wgmma, base)[0]   # 128/96 rows, twice the depth, a stage fewer, another path
    assert abs(near - (math.log2(128 / 96) + 3)) < 1e-9
    assert near < tuner._closeness(KernelConfig("mma16", 32, 32, 32, 2, wm=32, wn=32), base)[0]


@pytest.mark.skipif(has_gpu(), reason="checks the behaviour without a GPU")
def test_without_a_gpu_tune_raises_and_autotune_warns():
    plan = plan_of(256, 192, 128)
    with pytest.raises(gett.DeviceError, match="tuning times kernels on a GPU"):
        tuner.tune(plan, 1.0)
    d = gett.TensorDescriptor
    with pytest.warns(UserWarning, match="autotune skipped"):
        again = gett.plan_contraction(d((256, 128), None, "f16"), "mk", d((128, 192), None, "f16"), "kn",
                                      d((256, 192), None, "f16"), "mn", autotune=True)
    assert again is plan and not user_file().exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert plan_of(256, 192, 128) is plan            # autotune=None: no warning, the same plan


def test_tuner_data_keeps_long_sums_of_16_bit_outputs_finite():
    """The tuner checks every candidate against the heuristic's result on its own random data: values
    of magnitude 0.5-1.5 with random signs, so a sum over TCCG #13's K = 92352 stays far inside f16's
    range (with one sign it overflowed to inf everywhere, and any candidate then matched)."""
    import numpy as np

    from gett.dtypes import as_dtype
    from gett.tuner import _random_values
    x = _random_values(as_dtype("f16"), 92352, np.random.default_rng(0)).astype(np.float64)
    assert np.all((np.abs(x) >= 0.5) & (np.abs(x) <= 1.5))
    assert abs(x.sum()) < 65504 / 8 and (x < 0).any() and (x > 0).any()
    y = _random_values(as_dtype("i32"), 100, np.random.default_rng(0))
    assert y.min() >= 1 and y.max() <= 3


def test_tuner_times_each_run_after_evicting_the_run_before(monkeypatch):
    """Each timed run follows an untimed eviction of L2 (outside its pair of events), so an operand that
    fits L2 is not timed hot from the run before, as no program's next call would find it."""
    import types
    calls = []

    class Event:
        def record(self, stream=None):
            calls.append("event")

        def synchronize(self):
            pass
    cuda = types.SimpleNamespace(Event=Event, get_current_stream=lambda: None,
                                 get_elapsed_time=lambda start, end: 1.0)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))
    assert tuner._median_ms(lambda: calls.append("run"), lambda: calls.append("evict")) == 1.0
    timed = calls[tuner.WARMUP:]
    assert calls[:tuner.WARMUP] == ["run"] * tuner.WARMUP
    assert timed == ["evict", "event", "run", "event"] * tuner.RUNS
