"""The `dlbn` command: dlbn run, dlbn analyze, dlbn preflight.

Each subcommand is the native program of the same job, found inside the
installed package (dlbn.native_dir()), with the user's arguments passed on
untouched; this module only chooses the program and its defaults, so that
the options, messages and exit statuses are those of dlbn-run(1),
dlbn-analyze(1) and dlbn-preflight(1).

    dlbn run [options] -- COMMAND...   dlbn-run, analysing when COMMAND ends
    dlbn analyze TRACE|SUMMARY...      dlbn-analyze
    dlbn preflight [options]           dlbn-preflight
"""

import os
import subprocess
import sys

from dlbn import native_dir

USAGE = """\
usage: dlbn [-V | --version] [-h | --help] COMMAND [ARGS...]

Find out whether a PyTorch training run is held back by data loading.

commands:
  run [options] -- COMMAND...
            run COMMAND with the dlbn recorder preloaded (every process it
            starts is recorded), then print the report; the trace's path is
            said at the end, also when COMMAND fails.  --no-analyze only
            records.  Options: dlbn run --help
  analyze TRACE|SUMMARY... [options]
            the report of traces already recorded (several ranks: the job
            view).  Options: dlbn analyze --help
  preflight [options]
            can a workload be diagnosed on this machine?

`python -m dlbn` is the same command.  Manual pages: dlbn-run(1),
dlbn-analyze(1), dlbn-preflight(1), dlbn(7).
"""

# Environment that says this process is one rank of several (a launcher
# started `dlbn run` per rank): each rank records and summarises its own
# trace; the job's report is one `dlbn analyze` over the summaries.
# torchrun, srun's step (not SLURM_NTASKS: a batch script that itself runs
# `dlbn run -- torchrun` has it too), Open MPI, MPICH/PMI.
RANK_SIZES = ("WORLD_SIZE", "SLURM_STEP_NUM_TASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")


def program(name):
    """The native program NAME of this installation.

    Installed from the wheel: _native/bin/NAME.  Run from a source
    checkout (python/ on sys.path): the checkout's scripts/ and build/.
    """
    installed = os.path.join(native_dir(), "bin", name)
    if os.path.exists(installed):
        return installed
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    for candidate in (os.path.join(checkout, "scripts", name),
                      os.path.join(checkout, "build", name)):
        if os.path.exists(candidate):
            return candidate
    sys.stderr.write("dlbn: %s not found in %s (a broken installation?)\n"
                     % (name, native_dir()))
    sys.exit(2)


def one_rank_of_several():
    for name in RANK_SIZES:
        try:
            if int(os.environ.get(name, "1")) > 1:
                return True
        except ValueError:
            pass
    return False


def version():
    """`dlbn 0.1.0 (trace format 4.0)`, as the analyzer says it."""
    out = subprocess.run([program("dlbn-analyze"), "--version"], stdout=subprocess.PIPE,
                         universal_newlines=True, check=False).stdout.strip()
    return out.replace("dlbn-analyze ", "dlbn ", 1) if out else "dlbn (version unknown)"


def script(name, args, env=None):
    """Replace this process with the shell program NAME (dlbn-run and
    dlbn-preflight are POSIX sh; the execute bit may not survive every
    installer)."""
    path = program(name)
    os.execve("/bin/sh", ["/bin/sh", path] + args, env if env is not None else os.environ)


def run(args):
    env = dict(os.environ)
    # dlbn-run says `dlbn run:` and `dlbn analyze` in its messages.
    env["DLBN_RUN_AS"] = "dlbn"
    # dlbn-run finds the package's libdlbn.so beside itself (lib/dlbn/);
    # its --no-analyze, given later, still wins over this -a.
    analyse = [] if one_rank_of_several() else ["-a"]
    script("dlbn-run", analyse + args, env)


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        sys.stderr.write(USAGE)
        return 2
    if args[0] in ("-h", "--help", "help"):
        sys.stdout.write(USAGE)
        return 0
    command, rest = args[0], args[1:]
    if command in ("-V", "--version"):
        print(version())
        return 0
    if command == "run":
        run(rest)
    elif command == "analyze":
        path = program("dlbn-analyze")
        os.execv(path, [path] + rest)
    elif command == "preflight":
        # The interpreter dlbn is installed in is the training job's, most likely.
        env = dict(os.environ)
        env.setdefault("PYTHON", sys.executable)
        script("dlbn-preflight", rest, env)
    else:
        sys.stderr.write("dlbn: unknown command '%s'\n\n%s" % (command, USAGE))
        return 2
    return 0
