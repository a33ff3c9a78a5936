"""Peak resident memory of the calling process, for the benchmark contenders."""
import resource


def peak_rss_mb() -> float:
    """The process's peak resident set size in MB since its last ``exec``.

    ``/proc/self/status`` VmHWM belongs to the current address space, which ``exec`` replaces.
    ``getrusage``'s ``ru_maxrss`` is not used where VmHWM exists: Linux carries it over from
    the parent through fork + exec, so a contender started by a benchmark that had imported
    torch would report at least the benchmark's own peak.
    """
    try:
        with open('/proc/self/status') as f:
            for line in f:
                if line.startswith('VmHWM:'):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
