/*
 * session.h - the trace file this process writes to, and who we are in it.
 *
 * A session is one trace file shared by a training process tree.  The root
 * process creates it (safe creation: never follows a symlink, never
 * clobbers), maps its header MAP_SHARED and publishes
 * DLBN_SESSION=r<rank>:<absolute path> in its environment; exec'd or
 * spawned descendants of the same rank join it.  Extents are handed out by
 * an atomic counter in the mapped header.  No file descriptor is kept open:
 * each extent allocation opens the file by path, checks it is still the same
 * inode, grows it and maps the extent.  The application can therefore close
 * or dup2 over any fd without harming the trace.
 */
#ifndef DLBN_SESSION_H
#define DLBN_SESSION_H

#include <limits.h>
#include <sys/types.h>

#include "recorder.h"

struct session {
	struct dlbn_file_header *hdr; /* MAP_SHARED; NULL when no session */
	uint32_t extent_size;
	dev_t dev;
	ino_t ino;
	char path[PATH_MAX];

	/* This process instance. */
	pid_t pid; /* cached getpid(); refreshed in fork children */
	uint32_t proc_id;
	int64_t parent_proc_id; /* -1 for none */
	uint8_t start_kind;	/* DLBN_START_* */
	/* Bumped in every fork child: streams of another generation are stale. */
	uint32_t gen;
	uint32_t next_thread_no; /* atomic */
};

extern struct session the_session DLBN_HIDDEN;

/*
 * Set by the exec hooks in the new image's environment: "<proc_id>:<pid>" of
 * the process instance that called exec.  A joining process takes it as its
 * parent_proc_id when that pid is its own (exec in place) or its parent's
 * (vfork/posix_spawn-style children); anything else is stale and ignored.
 */
#define SESSION_PARENT_VAR "DLBN_PARENT"

/* Rank of this process for session matching (RANK, SLURM_PROCID,
 * OMPI_COMM_WORLD_RANK, else 0), and the raw variables (-1 unset). */
long session_rank(void) DLBN_HIDDEN;
long env_long(const char *name, long dflt) DLBN_HIDDEN;
const char *session_job_id(void) DLBN_HIDDEN;
/* The host's name for %h, the file header and PROCESS records: DLBN_HOST
 * when set (a container's hostname is not the node's; tests simulate
 * hosts), else gethostname(); '/' becomes '_'. */
void session_host(char *buf, size_t len) DLBN_HIDDEN;

/*
 * Constructor: join DLBN_SESSION when it names a trace of our rank on this
 * host, else create a new trace from DLBN_OUTPUT.  Returns 0 on success, -1
 * when this process does not record: either it called recorder_fail, or the
 * tree's root already reported a failure (DLBN_SESSION=r<rank>:-, or the
 * file is marked passive), and then it stays off without a second line.
 */
int session_start(void) DLBN_HIDDEN;

/* Fork child: new process instance in the same file. */
void session_fork_child(void) DLBN_HIDDEN;

/*
 * Disk space is committed to an extent in steps: a short-lived process (a
 * shell, a compiler that inherited LD_PRELOAD) then costs the first step of
 * disk, not a whole extent; the rest stays a hole.
 */
#define SESSION_FIRST_STEP (16 * 1024)
/* Later steps are larger: each one is an open, a pwrite and a close, and at
 * 16 KiB they cost ~8 ns per recorded call (make bench), at 64 KiB ~2. */
#define SESSION_GROW_STEP (64 * 1024)

/*
 * Allocate the next extent, allocate disk for its first SESSION_FIRST_STEP
 * bytes and map all of it.  Invariant: a stream never stores past the bytes
 * allocated with fallocate (session_grow_extent first), so a full disk fails
 * with ENOSPC here instead of SIGBUS in a store.  Returns the mapping
 * (extent_size bytes) and its file offset, or NULL after recorder_fail.
 */
void *session_new_extent(off_t *file_off) DLBN_HIDDEN;
/* Allocate disk for [off, off + len) of the file; -1 after recorder_fail. */
int session_grow_extent(off_t off, off_t len) DLBN_HIDDEN;

/* false in a vfork child (shares our memory but is another process). */
bool session_in_own_process(void) DLBN_HIDDEN;

/* Expand an output template (%p %h %r %j %%) into out. -1 if too long. */
int session_expand_template(const char *tmpl, char *out, size_t size) DLBN_HIDDEN;

/* Lifecycle entry points of recorder.c for the process hooks. */
/* Record EXIT (how = DLBN_EXIT_*) once per process instance, mark final. */
void recorder_record_exit(int status, int how) DLBN_HIDDEN;
/* python_boot.c: put the bootstrap on PYTHONPATH in CPython hosts. */
void python_boot_setup(void) DLBN_HIDDEN;

/* One informational stderr line "dlbn: <line>" unless DLBN_LOG=quiet
 * (recorder.c). */
void recorder_info(const char *line) DLBN_HIDDEN;

#endif /* DLBN_SESSION_H */
