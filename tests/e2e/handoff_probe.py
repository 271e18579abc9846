"""handoff_probe.py - drives python/_dlbn_handoff.py without torch, in
whatever interpreter runs it (sys.setprofile below Python 3.12,
sys.monitoring from 3.12), and prints what it saw as JSON for
test_handoff.py.

    handoff_probe.py BOOT_DIR

An Inner iterator plays the DataLoader iterator: its __next__ disarms,
and after "fetching" arms the hand-off for its caller when that is a
wrapper generator __iter__, as _dlbn_boot's wrapped __next__ does.
"""

import json
import sys
import time


def main(boot_dir):
    sys.path.insert(0, boot_dir)
    import _dlbn_handoff as handoff

    log = []

    class Inner:
        def __init__(self, n):
            self.i, self.n = 0, n

        def __iter__(self):
            return self

        def __next__(self):
            handoff.disarm()
            if self.i >= self.n:
                raise StopIteration
            self.i += 1
            log.append(("end", self.i, time.perf_counter()))
            frame = handoff.wrapper_frame(sys._getframe(1))
            if frame is not None:
                handoff.arm(frame, lambda i=self.i: log.append(("handoff", i, time.perf_counter())))
            return self.i

    class Wrapper:  # timm's PrefetchLoader shape: work on the batch, then yield
        def __init__(self, n, work_s=0.0, calls=0):
            self.n, self.work_s, self.calls = n, work_s, calls

        def __iter__(self):
            for x in Inner(self.n):
                if self.work_s:
                    time.sleep(self.work_s)  # C work (a tensor op): one call
                for _ in range(self.calls):
                    len("x")
                yield x

    class Skipping:  # two fetches per yield: the first one's window ends unmarked
        def __iter__(self):
            it = Inner(6)
            for x in it:
                next(it)
                yield x

    def not_a_wrapper():  # a generator loop of the program's own: not __iter__
        for x in Inner(3):
            yield x

    out = {"version": "%d.%d" % sys.version_info[:2]}

    def run(name, iterable):
        del log[:]
        got = []
        for x in iterable:
            got.append(("loop", x, time.perf_counter()))
        events = sorted(log + got, key=lambda e: e[2])
        out[name] = [[kind, i] for kind, i, _ in events]
        return events

    events = run("plain", Wrapper(3, work_s=0.005))
    ends = {i: t for kind, i, t in events if kind == "end"}
    hands = {i: t for kind, i, t in events if kind == "handoff"}
    out["plain_gap_s"] = [hands[i] - ends[i] for i in sorted(hands)]
    run("skipping", Skipping())
    run("not_a_wrapper", not_a_wrapper())
    out["profile_after"] = repr(sys.getprofile())

    # A profile function of the program's own is never replaced (below 3.12).
    def program_profile(frame, event, arg):
        pass
    sys.setprofile(program_profile)
    run("program_profile", Wrapper(2))
    out["program_profile_kept"] = sys.getprofile() is program_profile
    sys.setprofile(None)

    # A wrapper that makes more calls than the event budget: given up after
    # GIVE_UP_AFTER windows (below 3.12), marked every time with monitoring.
    run("busy", Wrapper(5, calls=handoff.EVENT_BUDGET + 10))
    out["give_up_after"] = handoff.GIVE_UP_AFTER
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
