"""Every kernel's parameters fit CUDA's limit, checked without a GPU.

Warp passes the Model and Data structs to a kernel by value, in the kernel's parameter space,
and a backward kernel takes them twice (the values and their adjoints): 2 x (Model + Data) is
~32 KB, at CUDA's limit on a kernel's parameters (32,764 bytes on Volta and newer GPUs, CUDA
12.1+). A field more in either struct can make the differentiable step fail to build on a GPU
("Formal parameter space overflowed", NVRTC error 6) while every CPU test passes: that is how
the limit was found (a kernel whose arguments came to 32,768 bytes needed 32,792: Warp adds its
launch bounds, 24 bytes). This test adds up each kernel's parameters from the argument types'
C layouts (ctypes, the layout Warp hands to CUDA) for every kernel the engine and the
differentiable step build, in both precisions and both schedules, and fails before a GPU
build would.
"""

import ctypes
import gc

import pytest
import warp as wp

from simrl.sim import forward, grad

#: CUDA's limit on a kernel's parameter space, bytes (CUDA 12.1+, compute capability >= 7.0)
CUDA_PARAM_LIMIT = 32764
#: what Warp passes besides the kernel's arguments (its launch bounds), bytes: measured (above)
LAUNCH_BOUNDS = 24


def _array_size() -> int:
    """Bytes of an array argument (Warp's array descriptor: pointers, shape, strides)."""
    return ctypes.sizeof(wp.zeros(1, dtype=float, device="cpu").__ctype__())


def _size(t) -> int:
    """Bytes of an argument of Warp type t in a kernel's parameters."""
    if wp.types.is_array(t):
        return _array_size()
    if hasattr(t, "ctype"):  # a struct
        return ctypes.sizeof(t.ctype)
    if t in (int, float, bool, wp.int32, wp.uint32, wp.float32, wp.bool):
        return 4
    if t in (wp.int64, wp.uint64, wp.float64):
        return 8
    return ctypes.sizeof(t)  # vectors and matrices are ctypes arrays


def _kernels():
    """Every wp.Kernel of simrl's modules that the engine's and the differentiable step's
    builders make (building makes the kernel objects; nothing is compiled)."""
    for scalar in (wp.float32, wp.float64):
        for schedule in ("fused", "wide"):
            grad.build(scalar, schedule)
            for convex in (False, True):
                forward.euler_segment(scalar, schedule, convex=convex)
                forward.forward_segment(scalar, schedule, sensors=False, convex=convex)
    return [k for k in gc.get_objects() if type(k) is wp.Kernel and k.module.name.startswith("simrl")]


def test_every_kernel_fits_cudas_parameter_limit():
    kernels = _kernels()
    assert len(kernels) > 100, "the builders made fewer kernels than the engine has"
    sizes = []
    for k in kernels:
        args = sum(_size(a.type) for a in k.adj.args)
        backward = k.module.options.get("enable_backward", wp.config.enable_backward)
        sizes.append(((2 if backward else 1) * args + LAUNCH_BOUNDS, k.key, k.module.name))
    sizes.sort(reverse=True)
    over = [s for s in sizes if s[0] > CUDA_PARAM_LIMIT]
    assert not over, (f"kernels over CUDA's {CUDA_PARAM_LIMIT}-byte parameter limit (bytes, kernel, module): "
                      f"{over[:5]}; Model and Data are passed by value: group new fields into arrays of "
                      f"structs rather than adding arrays to them")
    # the largest is a backward kernel with Model and Data: what is left for new fields
    print(f"largest: {sizes[0]}; {CUDA_PARAM_LIMIT - sizes[0][0]} bytes left")


#: the largest Data struct (bytes) the CUDA compiler keeps out of the stack: with one array more
#: (Data 8,176 -> 8,232 bytes) the sensor pass went from 96 registers and no spills to 255
#: registers, 37,712 bytes of stack and 29,960 of spills (scripts/gpu_report.py --passes sensor
#: --arch 90), every kernel alike
DATA_LIMIT = 8192


@pytest.mark.parametrize("scalar", [wp.float32, wp.float64])
def test_data_stays_within_what_cuda_keeps_in_registers(scalar):
    from simrl.sim.data import data_struct

    size = _size(data_struct(scalar))
    print(f"Data {size} bytes: {DATA_LIMIT - size} left")
    assert size <= DATA_LIMIT, (f"Data is {size} bytes, over {DATA_LIMIT}: the GPU kernels copy it to the stack; "
                                f"pack new per-world values into existing arrays")


def test_the_count_sees_a_struct_grow():
    """The check reads the structs' real layouts: a Data with one array more is 56 bytes larger."""
    from simrl.sim.data import data_struct

    Data = data_struct(wp.float32)

    @wp.struct
    class Bigger:
        d: Data
        extra: wp.array2d(dtype=wp.float32)

    assert _size(Bigger) == _size(Data) + _array_size() == _size(Data) + 56


if __name__ == "__main__":
    pytest.main([__file__, "-q", "-s"])
