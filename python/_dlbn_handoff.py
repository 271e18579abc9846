"""dlbn Python bootstrap: when a wrapper iterator hands the batch on.

Many pipelines put an iterable of their own between the DataLoader and the
training loop, a generator __iter__ that takes each batch from the loader,
works on it and yields it: timm's PrefetchLoader (moves the batch to the
device and normalises it), Hugging Face accelerate's DataLoaderShard
(send_to_device).  The reference Replay, and DALI's LoaderEvaluator, cache
what the loop iterates, so they remove that work along with the loader's
wait, while the fetch marks end when the DataLoader's __next__ returns.
_dlbn_patch arms this module after a fetch whose caller is such a
generator; the generator's next yield (or its end) then calls back, and
the bootstrap marks the hand-off (MARK HANDOFF; docs/DESIGN.md, "Loading after arrival").

How the yield is seen, without a per-call cost outside the window:

  Python 3.12+  sys.monitoring, PY_YIELD and PY_RETURN as local events of
                the wrapper's code object only (set once per code object);
                the callback checks that the yielding frame is the armed
                one.
  Python <3.12  sys.setprofile on the loop's thread from the fetch's end to
                the wrapper's next 'return' event (a yield is one), then off
                again.  Everything the wrapper calls in between costs a
                profile event, so a window is given up after EVENT_BUDGET
                events (a profile event costs ~170 ns here: at most
                ~0.35 ms a batch), and a code object that used its budget
                up GIVE_UP_AFTER times is not armed again.  Wrappers that
                call into torch (timm's: a few tensor ops) make tens.  A profile
                function the program set (cProfile, a tracer) is never
                replaced: no window then.

Not seen: the wrapper's work between the loop's next() on it and the
DataLoader fetch it then makes (accelerate moves the batch it holds to the
device there, before the fetch that reads ahead), and __next__-style
wrapper classes (Lightning's fetchers); those stay the loop's own work.
"""

import sys

CO_GENERATOR = 0x20
EVENT_BUDGET = 2000
GIVE_UP_AFTER = 3

_target = None      # the armed wrapper frame
_on_yield = None    # its callback (no arguments)
_left = 0           # profile events left in the window (Python < 3.12)
_spent = {}         # code object -> windows given up (Python < 3.12)
_watched = set()    # code objects with local events set (Python 3.12+)
_tool = None        # sys.monitoring tool id, once taken
_MONITORING = hasattr(sys, "monitoring")


def wrapper_frame(frame):
    """frame if it runs a generator __iter__ (a wrapper iterable), else None."""
    code = frame.f_code
    if code.co_name == "__iter__" and code.co_flags & CO_GENERATOR:
        return frame
    return None


def arm(frame, on_yield):
    """Call on_yield() when frame next yields or ends; True if armed."""
    global _target, _on_yield, _left
    disarm()
    code = frame.f_code
    if _MONITORING:
        if not _watch(code):
            return False
    else:
        if _spent.get(code, 0) >= GIVE_UP_AFTER or sys.getprofile() is not None:
            return False
        _left = EVENT_BUDGET
    _target, _on_yield = frame, on_yield
    if not _MONITORING:
        sys.setprofile(_profile_event)
    return True


def disarm():
    """Forget an armed frame that has not yielded (a new fetch began)."""
    global _target, _on_yield
    if _target is None:
        return
    if not _MONITORING and sys.getprofile() is _profile_event:
        sys.setprofile(None)
    _target = _on_yield = None


def _fire():
    global _target, _on_yield
    on_yield = _on_yield
    _target = _on_yield = None
    if not _MONITORING and sys.getprofile() is _profile_event:
        sys.setprofile(None)
    try:
        on_yield()
    except Exception:
        pass


def _profile_event(frame, event, arg):
    # Never raises: an exception here would reach the program's own code.
    global _left
    target = _target
    if target is None:  # not armed (cannot happen; stay out of the way)
        sys.setprofile(None)
    elif frame is target and event == "return":
        _fire()
    else:
        _left -= 1
        if _left <= 0:  # a busy wrapper: profiling it would cost the loop
            _spent[target.f_code] = _spent.get(target.f_code, 0) + 1
            disarm()


def _watch(code):
    global _tool
    if code in _watched:
        return True
    try:
        mon = sys.monitoring
        if _tool is None:
            for tool in (4, 3):
                if mon.get_tool(tool) is None:
                    mon.use_tool_id(tool, "dlbn")
                    _tool = tool
                    break
            else:
                return False
            mon.register_callback(_tool, mon.events.PY_YIELD, _monitor_event)
            mon.register_callback(_tool, mon.events.PY_RETURN, _monitor_event)
        mon.set_local_events(_tool, code, mon.events.PY_YIELD | mon.events.PY_RETURN)
        _watched.add(code)
        return True
    except Exception:
        return False


def _monitor_event(code, offset, value):
    if _target is not None and sys._getframe(1) is _target:
        _fire()
