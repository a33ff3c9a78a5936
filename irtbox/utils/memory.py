"""Peak resident memory of the calling process (the benchmarks)."""
import resource

__all__ = ['peak_rss_mb', 'reset_peak']


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
    """The process's peak resident set size in MB since its last ``exec`` (or
    :func:`reset_peak`).

    ``/proc/self/status`` VmHWM belongs to the current address space, which ``exec`` replaces.
    ``getrusage``'s ``ru_maxrss`` is not used where VmHWM exists: Linux carries it over from
    the parent through fork + exec, so a contender started by a benchmark that had imported
    torch would report at least the benchmark's own peak.
    """
    peak = _status_mb('VmHWM')
    return peak if peak is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak() -> float:
    """Reset the peak (VmHWM) to the current resident size and return that size in MB, so
    that ``peak_rss_mb() - reset_peak()`` is the extra peak of what runs in between.

    Writing 5 to ``/proc/self/clear_refs`` resets VmHWM (Linux >= 4.0); where that is not
    possible the current peak is returned, so the extra peak is never overstated by the
    set-up (it may be understated by it).
    """
    try:
        with open('/proc/self/clear_refs', 'w') as f:
            f.write('5')
        return _status_mb('VmRSS')
    except OSError:
        return peak_rss_mb()
