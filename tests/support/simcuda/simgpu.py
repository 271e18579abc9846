"""simgpu.py - drive the simulated GPU from Python workloads (ctypes).

    import simgpu
    gpu = simgpu.SimGPU()            # reach path from $SIMGPU_REACH
    s = gpu.stream()
    gpu.launch_us(s, 20000)          # a 20 ms kernel on s
    gpu.htod(s, 1 << 20, pinned=True, async_=True)
    gpu.stream_sync(s)               # like torch.cuda.synchronize / loss.item()
    e0 = gpu.event(s); ...; e1 = gpu.event(s)
    gpu.elapsed_ms(e0, e1)           # cuEventElapsedTime, once both completed

The GPU work goes through the public driver API exactly as an application's
would, so libdlbn.so records it: reach path "runtime" loads
build/tests/simcuda/libsimrt.so (dlopen + cuGetProcAddress_v2, like
libcudart), "direct" loads libsimrt_direct.so (PLT calls into a linked
libcuda.so.1).  Both are loaded privately (ctypes' RTLD_LOCAL), so
libcuda.so.1 never enters the global scope.  The simulated libcuda.so.1 is
found through the library's RUNPATH ($ORIGIN) for "direct" and through
LD_LIBRARY_PATH=build/tests/simcuda for "runtime" (set by the caller:
libsimrt.so dlopen()s libcuda.so.1 by soname, like libcudart does);
SimGPU() adds nothing to the environment.  SIMRT_PER_THREAD=1 selects the
per-thread default stream variants.
"""
import ctypes
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
SIM_DIR = os.path.join(ROOT, "build", "tests", "simcuda")
LIBS = {"runtime": "libsimrt.so", "direct": "libsimrt_direct.so"}


class SimGPUError(RuntimeError):
    pass


class SimGPU:
    def __init__(self, reach=None):
        self.reach = reach or os.environ.get("SIMGPU_REACH", "runtime")
        if self.reach not in LIBS:
            raise ValueError("reach must be one of %s, not %r" % (sorted(LIBS), self.reach))
        self.lib = ctypes.CDLL(os.path.join(SIM_DIR, LIBS[self.reach]), mode=os.RTLD_LOCAL)
        u64, pu64 = ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64)
        sig = {
            "simrt_init": [],
            "simrt_thread_attach": [],
            "simrt_stream_create": [ctypes.c_int, pu64],
            "simrt_launch_sleep_us": [u64, ctypes.c_uint],
            "simrt_launch_ex_sleep_us": [u64, ctypes.c_uint],
            "simrt_memcpy_htod": [u64, ctypes.c_size_t, ctypes.c_int, ctypes.c_int],
            "simrt_memcpy_dtoh": [u64, ctypes.c_size_t, ctypes.c_int, ctypes.c_int],
            "simrt_stream_sync": [u64],
            "simrt_ctx_sync": [],
            "simrt_event_record": [u64, pu64],
            "simrt_event_sync": [u64],
            "simrt_event_elapsed_ms": [u64, u64, ctypes.POINTER(ctypes.c_float)],
            "simrt_stream_wait_event": [u64, u64],
        }
        for name, args in sig.items():
            fn = getattr(self.lib, name)
            fn.argtypes = args
            fn.restype = ctypes.c_int
        self.lib.simrt_reach.restype = ctypes.c_char_p
        self.lib.simrt_compute_queued_ns.argtypes = []
        self.lib.simrt_compute_queued_ns.restype = ctypes.c_uint64
        self._check("simrt_init", self.lib.simrt_init())

    @staticmethod
    def _check(what, rc):
        if rc != 0:
            raise SimGPUError("%s failed: CUresult %d" % (what, rc))

    def thread_attach(self):
        """Make the GPU context current on the calling (non-main) thread."""
        self._check("thread_attach", self.lib.simrt_thread_attach())

    def stream(self, nonblocking=False):
        s = ctypes.c_uint64()
        self._check("stream_create", self.lib.simrt_stream_create(int(nonblocking),
                                                                  ctypes.byref(s)))
        return s.value

    def launch_us(self, stream, us):
        self._check("launch", self.lib.simrt_launch_sleep_us(stream, int(us)))

    def launch_ex_us(self, stream, us):
        self._check("launch_ex", self.lib.simrt_launch_ex_sleep_us(stream, int(us)))

    def htod(self, stream, nbytes, pinned=True, async_=True):
        self._check("htod", self.lib.simrt_memcpy_htod(stream, nbytes, int(pinned), int(async_)))

    def dtoh(self, stream, nbytes, pinned=True, async_=True):
        self._check("dtoh", self.lib.simrt_memcpy_dtoh(stream, nbytes, int(pinned), int(async_)))

    def stream_sync(self, stream):
        self._check("stream_sync", self.lib.simrt_stream_sync(stream))

    def compute_queued_s(self):
        """Kernel time queued so far on every stream (s): what a GPU
        utilization counter sees run, once the queue has drained."""
        return self.lib.simrt_compute_queued_ns() / 1e9

    def ctx_sync(self):
        self._check("ctx_sync", self.lib.simrt_ctx_sync())

    def event(self, stream):
        e = ctypes.c_uint64()
        self._check("event_record", self.lib.simrt_event_record(stream, ctypes.byref(e)))
        return e.value

    def event_sync(self, event):
        self._check("event_sync", self.lib.simrt_event_sync(event))

    def elapsed_ms(self, start, end):
        """cuEventElapsedTime(start, end) in ms; both must have completed."""
        ms = ctypes.c_float()
        self._check("event_elapsed", self.lib.simrt_event_elapsed_ms(start, end, ctypes.byref(ms)))
        return ms.value

    def wait_event(self, stream, event):
        self._check("wait_event", self.lib.simrt_stream_wait_event(stream, event))
