"""Peak resident memory of the calling process (the benchmarks), and the allocator settings
of a process whose job is one big build."""
import resource

__all__ = ['peak_rss_mb', 'reset_peak', 'map_large_blocks', 'give_back_freed_heap']


def _status_mb(field: str):
    try:
        with open('/proc/self/status') as f:
            for line in f:
                if line.startswith(field + ':'):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def peak_rss_mb() -> float:
    """The process's peak resident set size in MB since its last ``exec`` (or :func:`reset_peak`).
    ``/proc/self/status`` VmHWM belongs to the current address space, which ``exec`` replaces.
    ``getrusage``'s ``ru_maxrss`` is not used where VmHWM exists: Linux carries it over from the
    parent through fork + exec, so a contender started by a benchmark that had imported torch would
    report at least the benchmark's own peak."""
    peak = _status_mb('VmHWM')
    return peak if peak is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak() -> float:
    """Reset the peak (VmHWM) to the current resident size and return that size in MB, so that
    ``peak_rss_mb() - reset_peak()`` is the extra peak of what runs in between. Writing 5 to
    ``/proc/self/clear_refs`` resets VmHWM (Linux >= 4.0); where that is not possible the current
    peak is returned, so the extra peak is never overstated by the set-up (it may be understated by
    it)."""
    try:
        with open('/proc/self/clear_refs', 'w') as f:
            f.write('5')
        return _status_mb('VmRSS')
    except OSError:
        return peak_rss_mb()


def _libc():
    import ctypes
    try:
        return ctypes.CDLL('libc.so.6')
    except OSError:  # not glibc: its defaults stay
        return None


def map_large_blocks() -> None:
    """Blocks of 128 KB and more mapped and unmapped on their own for the rest of the process: glibc
    otherwise raises that threshold as such blocks are freed, and a faiss index's lists, which grow
    by doubling, leave their old buffers in the heap (docs/benchmarks.md, "Big collections").
    Process-wide, so the command whose process's whole job is the build sets it (the search
    command's build from an extraction's embeddings), not the library. A no-op off glibc."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(-3, 1 << 17)  # M_MMAP_THRESHOLD


def give_back_freed_heap() -> None:
    """Return the heap freed so far to the system (glibc ``malloc_trim``); a no-op elsewhere."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
