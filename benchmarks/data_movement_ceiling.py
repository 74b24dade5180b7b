"""How near the roofline the GPU lets any kernel come on the TCCG contractions' data movement.

    python benchmarks/data_movement_ceiling.py [--dtype f16] [--only 13-19] [--runs 30] [--gett RUN.json[.xz]]

The runner's roofline divides a contraction's minimal bytes (A and B read once, D written once) by a 1 GiB
device copy's bandwidth. This benchmark measures what moving exactly those bytes takes at the contraction's
size when the layout is the best there is: a streaming kernel reads A's and B's bytes and writes D's, 16-byte
vectors, consecutive threads on consecutive addresses, reads and writes interleaved (best of a few grids).
Where gett's plan stages an operand (copies it into another layout first, e.g. #14), a second figure puts a
plain contiguous device copy of that operand before the stream: the least the staging itself can cost.

Timed as the runner times gett: back-to-back calls, CUDA events around each, the buffer sets rotated so that
no call finds its data in L2, median of ``--runs``. Prints per contraction the stream's time, its fraction of
the roofline (this machine's 1 GiB copy, as the runner measures it), and with ``--gett`` a runner JSON's gett
time and the stream's time as a share of it; geomeans per group at the end. A yardstick, not a kernel of gett's.
"""
from __future__ import annotations

import argparse
import json
import lzma
import sys

STREAM_SOURCE = r"""
extern "C" __global__ void stream(const uint4* __restrict__ in, long long n_in,
                                  uint4* __restrict__ out, long long n_out, unsigned* sink) {
    const long long step = (long long)gridDim.x * blockDim.x;
    const long long n = n_in > n_out ? n_in : n_out;
    unsigned acc = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += 4 * step) {
        uint4 v[4];
        #pragma unroll
        for (int u = 0; u < 4; ++u) {   // four loads in flight a thread before any is used
            const long long j = i + u * step;
            v[u] = j < n_in ? in[j] : make_uint4(0, 0, 0, 0);
        }
        #pragma unroll
        for (int u = 0; u < 4; ++u) {
            const long long j = i + u * step;
            acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
            if (j < n_out) out[j] = make_uint4((unsigned)j, 0u, 0u, 0u);   // not waiting for the loads
        }
    }
    if (acc == 0x9e3779b9u) *sink = acc;   // keeps the loads: the compiler cannot know acc
}
"""

GRIDS = ((2, 512), (4, 256), (8, 256), (16, 128))   # (CTAs an SM, threads a CTA)
VECTOR = 16


def staged_bytes(contraction, dtype_name: str) -> int:
    """Bytes of the operands gett's plan (sm_90, beta = 0) copies before its contraction."""
    import gett
    from tccg_suite import gett_api
    d = gett_api.descriptors(gett, contraction, dtype_name)
    compute = "float32" if dtype_name in ("float16", "bfloat16") else None
    plan = gett.plan_contraction(d["A"], contraction.modes_A, d["B"], contraction.modes_B, d["C"],
                                 contraction.modes_C, compute_type=compute, beta=0.0, device_arch="sm_90a")
    return sum(st.nbytes for st in plan.staging)


def gett_times(path: str) -> dict[int, float]:
    """contraction id -> gett's median ms in a runner JSON (plain or .xz)."""
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt") as f:
        run = json.load(f)
    return {c["id"]: c["results"]["gett"]["median_ms"] for c in run["contractions"]
            if c["results"].get("gett", {}).get("median_ms")}


class Stream:
    """The streaming kernel over one contraction's byte counts, on ``sets`` rotated buffer sets."""

    def __init__(self, in_bytes: int, out_bytes: int, staged: int, sets: int):
        import cupy
        self.kernel = cupy.RawKernel(STREAM_SOURCE, "stream")
        self.n_in, self.n_out = -(-in_bytes // VECTOR), -(-out_bytes // VECTOR)
        self.ins = [cupy.random.randint(0, 2**31, size=4 * self.n_in, dtype=cupy.uint32) for _ in range(sets)]
        self.outs = [cupy.empty(4 * self.n_out, dtype=cupy.uint32) for _ in range(sets)]
        self.sink = cupy.zeros(1, dtype=cupy.uint32)
        self.staged = staged
        self.workspace = cupy.empty(staged, dtype=cupy.uint8) if staged else None
        self.sms = cupy.cuda.Device().attributes["MultiProcessorCount"]

    def call(self, grid: tuple, with_copy: bool):
        """``fn(i)`` for the timing: on buffer set ``i``, the staged bytes' copy (if asked), then the stream."""
        import numpy
        per_sm, threads = grid
        n_in, n_out = numpy.int64(self.n_in), numpy.int64(self.n_out)

        def run(i: int):
            if with_copy:   # the staged operand's bytes, copied as they lie (no transpose): staging's least cost
                self.workspace.data.copy_from_device_async(self.ins[i].data, self.staged)
            self.kernel((per_sm * self.sms,), (threads,), (self.ins[i], n_in, self.outs[i], n_out, self.sink))
        return run


def best_ms(stream: Stream, with_copy: bool, runs: int) -> float:
    from tccg_suite.timing import median_ms
    return min(median_ms(stream.call(grid, with_copy), runs=runs, warmup=5, rotate=len(stream.ins))
               for grid in GRIDS)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dtype", default="f16", help="f16 (f16 in and out) or f32")
    p.add_argument("--only", default="1-11,13-19,31-48", help="contraction ids (default: the memory-bound groups)")
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--gett", metavar="JSON", help="a runner JSON whose gett times to set beside the stream's")
    args = p.parse_args(argv)

    import cupy
    from tccg_suite.ceilings import copy_bandwidth
    from tccg_suite.data import set_count
    from tccg_suite.report import geomean
    from tccg_suite.runner import device_info
    from tccg_suite.suite import parse_ids, select
    dtype_name = {"f16": "float16", "f32": "float32"}[args.dtype]
    itemsize = 2 if args.dtype == "f16" else 4
    gett_ms = gett_times(args.gett) if args.gett else {}
    device = device_info()
    l2_bytes = device["l2_bytes"]
    bandwidth = copy_bandwidth()
    print(f"# {device['name']}, 1 GiB copy {bandwidth / 1e12:.3f} TB/s (read + write), L2 {l2_bytes / 2**20:.0f} MiB; "
          f"{args.dtype}, median of {args.runs}, best of grids {GRIDS}")
    print(f"{'id':>3} {'group':>7} {'MB':>7} {'roof us':>8} {'stream us':>9} {'frac':>6} {'staged MB':>9} "
          f"{'+copy us':>8} {'frac':>6} {'gett us':>8} {'stream/gett':>11}")
    by_group: dict[str, dict[str, list[float]]] = {}
    for c in select(parse_ids(args.only)):
        nbytes = c.min_bytes(itemsize, itemsize, beta_nonzero=False)
        in_bytes, out_bytes = (c.size("A") + c.size("B")) * itemsize, c.size("C") * itemsize
        staged = staged_bytes(c, dtype_name)
        stream = Stream(in_bytes, out_bytes, staged, set_count(c, dtype_name, l2_bytes))
        roof_ms = nbytes / bandwidth * 1e3
        plain = best_ms(stream, False, args.runs)
        copied = best_ms(stream, True, args.runs) if staged else plain
        g = by_group.setdefault(c.group, {"stream": [], "staged": [], "share": []})
        g["stream"].append(roof_ms / plain)
        g["staged"].append(roof_ms / copied)
        line = (f"{c.id:>3} {c.group:>7} {nbytes / 1e6:7.1f} {roof_ms * 1e3:8.1f} {plain * 1e3:9.1f} "
                f"{roof_ms / plain:6.3f} {staged / 1e6:9.1f} {copied * 1e3:8.1f} {roof_ms / copied:6.3f}")
        if c.id in gett_ms:
            g["share"].append(copied / gett_ms[c.id])
            line += f" {gett_ms[c.id] * 1e3:8.1f} {copied / gett_ms[c.id]:11.3f}"
        print(line, flush=True)
        del stream
        cupy.get_default_memory_pool().free_all_blocks()
    print("# geomeans: fraction of the roofline for the stream alone / with the staging copies"
          + (" / the stream's time over gett's (with the copies)" if gett_ms else ""))
    for group, g in by_group.items():
        share = f" / {geomean(g['share']):.3f}" if g["share"] else ""
        print(f"  {group:>7}: {geomean(g['stream']):.3f} / {geomean(g['staged']):.3f}{share}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
