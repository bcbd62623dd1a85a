"""A trainer's memory, sampled from inside it: resident set and glibc's heap, every 10 seconds.

    PYTHONPATH=scripts/memhook MEMHOOK_LOG=/tmp/mem rpr-nmt-train ...

Python imports this module at start-up when its folder is on PYTHONPATH. In an rpr-nmt-train
process with MEMHOOK_LOG set, a daemon thread appends one line every 10 s to MEMHOOK_LOG.<pid>:

    18:15:35 rss 7004 arena 6601 inuse 1286 free 5314 mmap 2

in MiB: the resident set (/proc/self/statm), and glibc's mallinfo2: the heap's size (arena), its
bytes in use (inuse) and free (free), and the blocks mapped apart (mmap). A heap much larger than
its bytes in use is fragmented. MEMHOOK_TRIM=SECONDS also calls malloc_trim(0) that often. Under
another allocator (jemalloc by LD_PRELOAD) the heap figures are glibc's, near zero.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time

FIELDS = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
          "fordblks", "keepcost")  # fmt: skip


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in FIELDS]


def sample_forever(path: str, trim_seconds: float) -> None:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    page = os.sysconf("SC_PAGE_SIZE")
    last_trim = time.monotonic()
    with open(path, "a") as out:
        while True:
            heap = libc.mallinfo2()
            with open("/proc/self/statm") as statm:
                rss = int(statm.read().split()[1]) * page
            figures = [("rss", rss), ("arena", heap.arena), ("inuse", heap.uordblks),
                       ("free", heap.fordblks), ("mmap", heap.hblkhd)]  # fmt: skip
            out.write(time.strftime("%H:%M:%S ") + " ".join(f"{k} {v >> 20}" for k, v in figures))
            out.write("\n")
            out.flush()
            if trim_seconds and time.monotonic() - last_trim > trim_seconds:
                libc.malloc_trim(0)
                last_trim = time.monotonic()
            time.sleep(10)


if os.environ.get("MEMHOOK_LOG") and "rpr-nmt-train" in " ".join(sys.argv):
    target = f"{os.environ['MEMHOOK_LOG']}.{os.getpid()}"
    trim = float(os.environ.get("MEMHOOK_TRIM", "0"))
    threading.Thread(target=sample_forever, args=(target, trim), daemon=True).start()
