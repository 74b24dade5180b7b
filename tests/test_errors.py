"""Bad input: one test per mistake, checking the exception class (a gett error that is also a ValueError or
TypeError) and that the message names the tensor, the mode and the values involved."""
import numpy as np
import pytest

import gett

LONGDOUBLE = getattr(np, "float128", None)


def desc(shape, strides=None, dtype="f32"):
    return gett.TensorDescriptor(shape, strides, dtype)


def arrays(dtype=np.float64):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((3, 4)).astype(dtype), rng.standard_normal((4, 5)).astype(dtype),
            rng.standard_normal((3, 5)).astype(dtype))


def test_error_hierarchy():
    """Every gett error is a GettError and the builtin a user would catch."""
    for cls, base in [(gett.ModeError, ValueError), (gett.ExtentMismatchError, ValueError),
                      (gett.StrideError, ValueError), (gett.DTypeError, TypeError),
                      (gett.PlanMismatchError, ValueError), (gett.DeviceError, ValueError),
                      (gett.OutputNotWritableError, ValueError), (gett.UnsupportedOperation, ValueError)]:
        assert issubclass(cls, base) and issubclass(cls, gett.GettError)
    assert issubclass(gett.ExtentMismatchError, gett.ModeError)


# ---------------------------------------------------------------------------------------------------------
# Modes and extents
# ---------------------------------------------------------------------------------------------------------

def test_extent_mismatch_between_inputs():
    """K mode with extent 4 in A and 5 in B."""
    with pytest.raises(gett.ExtentMismatchError, match=r"mode 'k' has extent 4 in A but 5 in B") as e:
        gett.plan_contraction(desc((3, 4)), "mk", desc((5, 6)), "kn", desc((3, 6)), "mn")
    assert isinstance(e.value, ValueError)


def test_extent_mismatch_between_input_and_output():
    """M mode with extent 3 in A and 2 in C."""
    with pytest.raises(gett.ExtentMismatchError, match=r"mode 'm' has extent 3 in A but 2 in C"):
        gett.plan_contraction(desc((3, 4)), "mk", desc((4, 6)), "kn", desc((2, 6)), "mn")


def test_extent_mismatch_int_labels():
    """Integer labels are named too."""
    with pytest.raises(gett.ExtentMismatchError, match=r"mode 7 has extent 6 in B but 5 in C"):
        gett.plan_contraction(desc((3, 4)), [1, 2], desc((4, 6)), [2, 7], desc((3, 5)), [1, 7])


def test_d_shape_differs_from_c():
    """D must have C's shape (same modes)."""
    with pytest.raises(gett.ExtentMismatchError, match=r"D has shape \(3, 7\) but C has shape \(3, 6\)"):
        gett.plan_contraction(desc((3, 4)), "mk", desc((4, 6)), "kn", desc((3, 6)), "mn", D=desc((3, 7)))


def test_c_mode_in_neither_input():
    """A mode of C that is in neither A nor B must be declared broadcast."""
    with pytest.raises(gett.ModeError, match=r"mode 'z' of C \(extent 6\) is in neither A nor B.*"
                                             r"broadcast=\['z'\]") as e:
        gett.plan_contraction(desc((3, 4)), "mk", desc((4, 5)), "kn", desc((3, 5, 6)), "mnz")
    assert isinstance(e.value, ValueError)


def test_broadcast_mode_also_in_an_input():
    """A declared broadcast mode that A has is not broadcast."""
    with pytest.raises(gett.ModeError, match=r"broadcast mode 'm' is also a mode of A or B"):
        gett.plan_contraction(desc((3, 4)), "mk", desc((4, 5)), "kn", desc((3, 5)), "mn", broadcast=["m"])


def test_broadcast_mode_in_inputs_only():
    """A declared broadcast mode that is a K mode (not in C) is rejected, naming it."""
    with pytest.raises(gett.ModeError, match=r"broadcast mode 'k'"):
        gett.plan_contraction(desc((3, 4)), "mk", desc((4, 5)), "kn", desc((3, 5)), "mn", broadcast=["k"])


def test_broadcast_mode_unknown():
    """A declared broadcast mode that no tensor has."""
    with pytest.raises(gett.ModeError, match=r"broadcast mode 'q' is not a mode of C"):
        gett.plan_contraction(desc((3, 4)), "mk", desc((4, 5)), "kn", desc((3, 5)), "mn", broadcast=["q"])


@pytest.mark.parametrize("tensor", ["A", "B", "C"])
def test_repeated_mode(tensor):
    """A mode twice in one tensor (a diagonal) is refused, naming the mode and the tensor."""
    modes = {"A": "mk", "B": "kn", "C": "mn"}
    shapes = {"A": (3, 4), "B": (4, 5), "C": (3, 5)}
    repeated = {"A": "mm", "B": "kk", "C": "nn"}[tensor]
    modes[tensor] = repeated
    shapes[tensor] = (shapes[tensor][0],) * 2
    with pytest.raises(gett.ModeError, match=rf"mode '{repeated[0]}' appears twice in {tensor} "
                                             rf"\('{repeated}'\)"):
        gett.plan_contraction(desc(shapes["A"]), modes["A"], desc(shapes["B"]), modes["B"],
                              desc(shapes["C"]), modes["C"])


def test_too_many_modes():
    """Three modes for a 2-d A."""
    with pytest.raises(gett.ModeError, match=r"A has 2 dimensions but 3 modes were given: 'mkx'"):
        gett.plan_contraction(desc((3, 4)), "mkx", desc((4, 5)), "kn", desc((3, 5)), "mn")


def test_too_few_modes():
    """One mode for a 2-d B."""
    with pytest.raises(gett.ModeError, match=r"B has 2 dimensions but 1 modes were given: 'k'"):
        gett.plan_contraction(desc((3, 4)), "mk", desc((4, 5)), "k", desc((3, 5)), "mn")


def test_d_ndim_differs_from_c():
    """D with a different number of dimensions than C."""
    with pytest.raises(gett.ModeError, match=r"D has 3 dimensions but C has 2"):
        gett.plan_contraction(desc((3, 4)), "mk", desc((4, 5)), "kn", desc((3, 5)), "mn",
                              D=desc((3, 5, 1)))


@pytest.mark.parametrize("label", [1.5, 2.0, True, None, (1, 2)])
def test_bad_mode_label_type(label):
    """Labels must be ints or strings: floats, bools, None, tuples are refused, naming label and tensor."""
    with pytest.raises(gett.ModeError, match=rf"mode label {label!r} of B must be an int or a string".
                       replace("(", r"\(").replace(")", r"\)")):
        gett.plan_contraction(desc((3, 4)), "mk", desc((4, 5)), ["k", label], desc((3, 5)), "mn")


def test_modes_not_a_sequence():
    """Modes given as a number (not a string or sequence)."""
    with pytest.raises(gett.ModeError, match=r"modes of C must be a string or a sequence of labels, got 5"):
        gett.plan_contraction(desc((3, 4)), "mk", desc((4, 5)), "kn", desc((3, 5)), 5)


def test_negative_extent_in_descriptor():
    """A descriptor with a negative extent."""
    with pytest.raises(gett.ModeError, match=r"shape \(3, -1\) has a negative extent"):
        desc((3, -1))


def test_descriptor_strides_length():
    """A descriptor with fewer strides than dimensions."""
    with pytest.raises(gett.StrideError, match=r"1 strides given for a shape of 2 dimensions"):
        desc((3, 4), (1,))


# ---------------------------------------------------------------------------------------------------------
# dtypes
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["bool", "float128", "uint8", "int8"])
def test_unsupported_dtype_descriptor(dtype):
    """A descriptor with a dtype gett does not implement."""
    spelling = LONGDOUBLE if dtype == "float128" else dtype
    if spelling is None:
        pytest.skip("numpy has no float128 here")
    with pytest.raises(gett.DTypeError, match=r"unsupported dtype .*gett supports f16, bf16, f32") as e:
        desc((2, 2), dtype=spelling)
    assert isinstance(e.value, TypeError)


@pytest.mark.parametrize("dtype", ["bool", "float128"])
def test_unsupported_dtype_array(dtype):
    """A numpy array of an unsupported dtype: DTypeError naming the tensor (B) and the dtype."""
    if dtype == "float128" and LONGDOUBLE is None:
        pytest.skip("numpy has no float128 here")
    A, _, C = arrays()
    B = np.zeros((4, 5), dtype=LONGDOUBLE if dtype == "float128" else dtype)
    with pytest.raises(gett.DTypeError, match=rf"B: unsupported dtype .*{dtype}"):
        gett.plan_contraction(A, "mk", B, "kn", C, "mn")


def test_unsupported_dtype_array_at_contract():
    """An array of an unsupported dtype passed to contract: DTypeError naming the tensor."""
    A, B, C = arrays()
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn")
    with pytest.raises(gett.DTypeError, match=r"B: unsupported dtype .*bool"):
        gett.contract(plan, 1.0, A, B.astype(bool), 0.0, C)


def test_unsupported_dtype_array_is_a_typeerror_naming_tensor():
    """Whatever its class, the error for a bool array is a TypeError that names B and bool."""
    A, B, C = arrays()
    with pytest.raises(TypeError, match=r"B: unsupported dtype .*bool"):
        gett.plan_contraction(A, "mk", B.astype(bool), "kn", C, "mn")


def test_a_and_b_dtypes_differ():
    """A f32 with B f64."""
    A, B, C = arrays()
    with pytest.raises(gett.DTypeError, match=r"A and B must have the same dtype, got A f32 and B f64") as e:
        gett.plan_contraction(A.astype(np.float32), "mk", B, "kn", C.astype(np.float32), "mn")
    assert isinstance(e.value, TypeError)


def test_c_and_d_dtypes_differ():
    """C f32 with D f64."""
    with pytest.raises(gett.DTypeError, match=r"C and D must have the same dtype, got C f32 and D f64"):
        gett.plan_contraction(desc((3, 4)), "mk", desc((4, 5)), "kn", desc((3, 5)), "mn",
                              D=desc((3, 5), dtype="f64"))


def test_f32_inputs_f16_output():
    """f32 inputs cannot write an f16 output."""
    with pytest.raises(gett.DTypeError, match=r"output dtype f16 is not supported with f32 inputs "
                                              r"\(supported: f32\)"):
        gett.plan_contraction(desc((3, 4)), "mk", desc((4, 5)), "kn", desc((3, 5), dtype="f16"), "mn")


def test_f16_inputs_f64_output():
    """f16 inputs write f16 or f32, not f64."""
    with pytest.raises(gett.DTypeError, match=r"output dtype f64 is not supported with f16 inputs "
                                              r"\(supported: f16, f32\)"):
        gett.plan_contraction(desc((3, 4), dtype="f16"), "mk", desc((4, 5), dtype="f16"), "kn",
                              desc((3, 5), dtype="f64"), "mn")


@pytest.mark.parametrize("dtype,ct", [("f64", "tf32"), ("f64", "3xtf32"), ("f16", "tf32"), ("f64", "f32"),
                                      ("i32", "f32"), ("f32", "bogus")])
def test_compute_type_not_for_dtype(dtype, ct):
    """compute_type tf32/3xtf32 only for f32 data; other mismatches are refused, naming both."""
    with pytest.raises(gett.DTypeError, match=rf"compute_type '{ct}' is not supported for {dtype} inputs"):
        gett.plan_contraction(desc((3, 4), dtype=dtype), "mk", desc((4, 5), dtype=dtype), "kn",
                              desc((3, 5), dtype=dtype), "mn", compute_type=ct)


# ---------------------------------------------------------------------------------------------------------
# Output strides and writability
# ---------------------------------------------------------------------------------------------------------

def test_negative_output_stride_default_d():
    """C is the output (no D) and has a negative stride in dimension 1."""
    A, B, _ = arrays()
    C = np.zeros((3, 5))[:, ::-1]
    with pytest.raises(gett.StrideError, match=r"C \(the output, D defaults to C\) has a negative stride -1 "
                                               r"in dimension 1") as e:
        gett.plan_contraction(A, "mk", B, "kn", C, "mn")
    assert isinstance(e.value, ValueError)


def test_negative_output_stride_separate_d():
    """D has a negative stride in dimension 0; C (an input when D is given) may."""
    A, B, _ = arrays()
    C = np.zeros((3, 5))[::-1]
    gett.plan_contraction(A, "mk", B, "kn", C, "mn", D=np.zeros((3, 5)))   # fine: C is only read
    with pytest.raises(gett.StrideError, match=r"D has a negative stride -5 in dimension 0"):
        gett.plan_contraction(A, "mk", B, "kn", C, "mn", D=np.zeros((3, 5))[::-1])


def test_output_stride_zero():
    """D with stride 0 in a dimension of extent 3 (np.broadcast_to): elements alias."""
    A, B, C = arrays()
    D = np.broadcast_to(np.zeros(5), (3, 5))
    with pytest.raises(gett.StrideError, match=r"D has stride 0 in dimension 0 \(extent 3\)"):
        gett.plan_contraction(A, "mk", B, "kn", C, "mn", D=D)


def test_output_stride_zero_descriptor():
    """The same with a descriptor: stride 0 on an extent-5 dimension."""
    with pytest.raises(gett.StrideError, match=r"D has stride 0 in dimension 1 \(extent 5\)"):
        gett.plan_contraction(desc((3, 4)), "mk", desc((4, 5)), "kn", desc((3, 5)), "mn", D=desc((3, 5), (5, 0)))


def test_output_strides_overlap_as_strided():
    """An as_strided view whose dimensions alias (strides (1, 1) elements on a 3x3 view)."""
    A, B, _ = arrays()
    A = A[:, :3]
    B = B[:3, :3]
    D = np.lib.stride_tricks.as_strided(np.zeros(16), shape=(3, 3), strides=(8, 8))
    with pytest.raises(gett.StrideError, match=r"D strides \(1, 1\) overlap: dimension 1 \(stride 1\) steps "
                                               r"inside dimension 0 \(stride 1 × extent 3\)"):
        gett.plan_contraction(A, "mk", B, "kn", np.zeros((3, 3)), "mn", D=D)


def test_output_strides_overlap_partial():
    """Strides (2, 1) on a (4, 4) output: row i+1 starts inside row i."""
    D = np.lib.stride_tricks.as_strided(np.zeros(32, np.float32), shape=(4, 4), strides=(8, 4))
    with pytest.raises(gett.StrideError, match=r"C \(the output, D defaults to C\) strides \(2, 1\) overlap: "
                                               r"dimension 0 \(stride 2\) steps inside dimension 1 "
                                               r"\(stride 1 × extent 4\)"):
        gett.plan_contraction(desc((4, 3)), "mk", desc((3, 4)), "kn", D, "mn")


def test_output_stride_not_element_multiple():
    """A byte stride that is not a multiple of the element size is refused with a StrideError."""
    D = np.lib.stride_tricks.as_strided(np.zeros(32, np.float32), shape=(3,), strides=(6,))
    with pytest.raises(gett.StrideError, match=r"stride of 6 bytes is not a multiple of the element size 4"):
        gett.plan_contraction(desc((3, 4)), "mk", desc((4,)), "k", desc((3,)), "m", D=D)


def test_output_stride_not_element_multiple_names_tensor():
    """The byte-stride error names the tensor (D)."""
    D = np.lib.stride_tricks.as_strided(np.zeros(32, np.float32), shape=(3,), strides=(6,))
    with pytest.raises(gett.StrideError, match=r"D.*stride of 6 bytes"):
        gett.plan_contraction(desc((3, 4)), "mk", desc((4,)), "k", desc((3,)), "m", D=D)


def test_output_not_writable_at_plan_time():
    """A read-only D is refused when planning."""
    A, B, C = arrays()
    D = np.zeros((3, 5))
    D.flags.writeable = False
    with pytest.raises(gett.OutputNotWritableError, match=r"output array \(D\) is read-only") as e:
        gett.plan_contraction(A, "mk", B, "kn", C, "mn", D=D)
    assert isinstance(e.value, ValueError)


def test_c_as_output_not_writable_at_plan_time():
    """No D and a read-only C: C is the output, so it is refused."""
    A, B, C = arrays()
    C.flags.writeable = False
    with pytest.raises(gett.OutputNotWritableError, match=r"read-only"):
        gett.plan_contraction(A, "mk", B, "kn", C, "mn")


def test_read_only_inputs_are_fine():
    """Read-only A, B and C (with a separate D) are accepted and not written."""
    A, B, C = arrays()
    for x in (A, B, C):
        x.flags.writeable = False
    D = np.zeros((3, 5))
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn", D=D)
    gett.contract(plan, 1.0, A, B, 1.0, C, D)
    np.testing.assert_allclose(D, A @ B + C, rtol=1e-12)


def test_output_not_writable_at_contract_time():
    """A read-only D at contract time is refused, and it is not written."""
    A, B, C = arrays()
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn", D=np.zeros((3, 5)))
    D = np.full((3, 5), -7.0)
    D.flags.writeable = False
    with pytest.raises(gett.OutputNotWritableError, match=r"output array is read-only"):
        gett.contract(plan, 1.0, A, B, 0.0, C, D)
    assert np.all(D == -7.0)


# ---------------------------------------------------------------------------------------------------------
# Arrays at contract time that don't match the plan
# ---------------------------------------------------------------------------------------------------------

def test_contract_shape_mismatch():
    """A with a different shape than the plan's."""
    A, B, C = arrays()
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn")
    with pytest.raises(gett.PlanMismatchError, match=r"A has shape \(3, 5\), the plan was made for \(3, 4\)") as e:
        gett.contract(plan, 1.0, np.zeros((3, 5)), B, 0.0, C)
    assert isinstance(e.value, ValueError)


def test_contract_dtype_mismatch():
    """B f32 where the plan has f64."""
    A, B, C = arrays()
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn")
    with pytest.raises(gett.PlanMismatchError, match=r"B has dtype f32, the plan was made for f64"):
        gett.contract(plan, 1.0, A, B.astype(np.float32), 0.0, C)


def test_contract_strides_mismatch():
    """B transposed in memory (Fortran order) where the plan has C order."""
    A, B, C = arrays()
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn")
    with pytest.raises(gett.PlanMismatchError, match=r"B has strides \(1, 4\) \(elements\), the plan was made "
                                                     r"for \(5, 1\)"):
        gett.contract(plan, 1.0, A, np.asfortranarray(B), 0.0, C)


def test_contract_in_place_output_mismatch():
    """No D: C doubles as the output and is named so."""
    A, B, C = arrays()
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn", D=np.zeros((3, 5), order="F"))
    with pytest.raises(gett.PlanMismatchError, match=r"C \(as D\) has strides \(5, 1\) \(elements\), "
                                                     r"the plan was made for \(1, 3\)"):
        gett.contract(plan, 1.0, A, B, 0.0, C)


def test_contract_not_an_array():
    """A list is not an array: TypeError naming the tensor."""
    A, B, C = arrays()
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn")
    with pytest.raises(TypeError, match=r"A: unsupported array type list"):
        gett.contract(plan, 1.0, A.tolist(), B, 0.0, C)


def test_plan_not_an_array():
    """A list given to plan_contraction: TypeError naming the tensor."""
    A, B, C = arrays()
    with pytest.raises(TypeError, match=r"B: unsupported array type list"):
        gett.plan_contraction(A, "mk", B.tolist(), "kn", C, "mn")


class _Obj:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def _fake_cupy(like: np.ndarray):
    """An object that describes itself like a CuPy array on cuda:0 (no GPU needed): array_kind looks at
    the type's module, describe() at shape/strides/dtype/itemsize/data.ptr/device.id."""
    cls = type("ndarray", (), {"__module__": "cupy._core.core"})
    x = cls()
    x.shape, x.strides, x.dtype, x.itemsize = like.shape, like.strides, like.dtype, like.itemsize
    x.data, x.device = _Obj(ptr=256 * 1024), _Obj(id=0)
    return x


def test_contract_mixed_numpy_and_device_array():
    """A numpy A with a (stand-in) CuPy B at contract time: DeviceError naming each tensor's place."""
    A, B, C = arrays()
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn")
    D0 = C.copy()
    with pytest.raises(gett.DeviceError, match=r"A: numpy on host, B: cupy on cuda:0") as e:
        gett.contract(plan, 1.0, A, _fake_cupy(B), 0.0, C)
    assert isinstance(e.value, ValueError)
    assert np.array_equal(C, D0)


def test_plan_mixed_numpy_and_device_array():
    """A numpy A with a (stand-in) CuPy B at plan time: DeviceError."""
    A, B, C = arrays()
    with pytest.raises(gett.DeviceError, match=r"arrays are on different devices: A on host, B on cuda:0"):
        gett.plan_contraction(A, "mk", _fake_cupy(B), "kn", C, "mn")


# ---------------------------------------------------------------------------------------------------------
# Nothing is written to D when an error is raised
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["A-shape", "B-dtype", "C-strides", "D-shape", "B-device", "D-readonly"])
def test_nothing_written_on_contract_error(which):
    """Poison D with a sentinel, pass one bad array to contract, and check D (and C) unchanged."""
    A, B, C = arrays()
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn", D=np.zeros((3, 5)))
    D = np.full((3, 5), -12345.0)
    C0 = C.copy()
    args = {"A": A, "B": B, "C": C, "D": D}
    if which == "A-shape":
        args["A"] = np.ones((3, 3))
    elif which == "B-dtype":
        args["B"] = B.astype(np.float32)
    elif which == "C-strides":
        args["C"] = np.asfortranarray(C)
    elif which == "D-shape":
        args["D"] = np.full((3, 6), -12345.0)
        D = args["D"]
    elif which == "B-device":
        args["B"] = _fake_cupy(B)
    else:
        D.flags.writeable = False
    with pytest.raises(gett.GettError):
        gett.contract(plan, 1.0, args["A"], args["B"], 1.0, args["C"], args["D"])
    assert np.all(D == -12345.0)
    assert np.array_equal(C, C0)


def test_nothing_written_on_in_place_error():
    """In place (D = C): a mismatched B leaves C untouched."""
    A, B, C = arrays()
    plan = gett.plan_contraction(A, "mk", B, "kn", C, "mn")
    C0 = C.copy()
    with pytest.raises(gett.PlanMismatchError):
        gett.contract(plan, 1.0, A, B[:, :4], 1.0, C)
    assert np.array_equal(C, C0)
