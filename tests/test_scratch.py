"""gett.launch.Scratch, a call's scratch memory, on a stand-in for CuPy that records what is asked of it:
from the pool normally, allocated and freed in stream order while the stream is being captured into a CUDA
graph (the pool's memory would go to other arrays while the graph's replays still write it). On the GPU:
tests/test_gpu_graphs.py."""
from types import SimpleNamespace

from gett.launch import Scratch


def _cupy(capturing: set):
    """A CuPy stand-in: streams in ``capturing`` are being captured; every runtime call is logged."""
    log = []

    def is_capturing(stream):
        log.append(("is_capturing", stream))
        return stream in capturing

    def malloc_async(nbytes, stream):
        log.append(("malloc_async", nbytes, stream))
        return 0x7000

    def alloc(nbytes):
        log.append(("pool", nbytes))
        return SimpleNamespace(ptr=0x5000)

    runtime = SimpleNamespace(streamIsCapturing=is_capturing, mallocAsync=malloc_async,
                              freeAsync=lambda ptr, stream: log.append(("free_async", ptr, stream)))
    return SimpleNamespace(cuda=SimpleNamespace(runtime=runtime, alloc=alloc)), log


def test_a_stream_not_being_captured_takes_the_pool():
    cupy, log = _cupy(capturing=set())
    s = Scratch(cupy, 4096, stream=0x11)
    assert s.ptr == 0x5000
    s.release(cupy)
    s.release(cupy)   # nothing to free: the pool takes the memory back once nothing refers to it
    assert log == [("is_capturing", 0x11), ("pool", 4096)]


def test_the_legacy_default_stream_is_never_asked():
    """Handle 0 cannot be captured (and asking about it while another stream captures is an error)."""
    cupy, log = _cupy(capturing={0})
    Scratch(cupy, 128, stream=0).release(cupy)
    assert log == [("pool", 128)]


def test_a_capturing_stream_allocates_and_frees_in_stream_order():
    cupy, log = _cupy(capturing={0x22})
    s = Scratch(cupy, 4096, stream=0x22)
    assert s.ptr == 0x7000
    assert log == [("is_capturing", 0x22), ("malloc_async", 4096, 0x22)]
    s.release(cupy)
    s.release(cupy)   # a second release frees nothing more
    assert log[2:] == [("free_async", 0x7000, 0x22)]


def test_a_caller_that_knows_the_stream_is_captured_saves_the_query():
    """einsum's graph arrays: ``capturing()`` has asked already, so the scratch does not ask again."""
    cupy, log = _cupy(capturing={0x22})
    s = Scratch(cupy, 256, stream=0x22, captured=True)
    assert s.ptr == 0x7000 and log == [("malloc_async", 256, 0x22)]
    s.release(cupy)
    assert log[1:] == [("free_async", 0x7000, 0x22)]
