/*
 * table_int.h — private to index/table*.c: the Table structure and the
 * helpers its files share.
 *
 * Sections: table.c (snapshots, batches, commit, checkpoint, open/close),
 * table_merge.c (merge policy and threads: the tiers of segment files, the
 * in-memory tier and its flush to files).
 */
#ifndef QR_TABLE_INT_H
#define QR_TABLE_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "index/table.h"

enum { WAL_PUT = 1, WAL_DELETE = 2, WAL_COMMIT = 3 };

/* What the table knows of one committed segment, beside the Segment. */
typedef struct SegMeta {
    uint64_t id;
    bool in_mem;     /* an in-memory segment (the NRT tier): no file, never in a
                        manifest; its commits are replayed from the WAL */
    bool synced;     /* file fsynced */
    uint64_t del_gen;  /* generation of the deletes file on disk (0 = none) */
    bool del_dirty;  /* deletes changed since the last checkpoint */
    bool merging;    /* picked by a running merge */
    bool merge_failed; /* a merge including it found damage: left out until reopened */
    bool merge_wait;   /* a merge including it ran out of disk space or memory: left
                          out until the table's merge_retry_at commit */
    uint64_t pending_old_gen; /* deletes file to remove after the next manifest */
    uint64_t born_ns;  /* in_mem: monotonic time of its oldest commit (age flush) */
} SegMeta;

/* Invariants (under wlock): segs/dels/meta are the committed state (every
 * commit whose records were written to the WAL, acknowledged or not yet);
 * snapshots are copies of it, and the installed one (snap) never shows a
 * commit before the WAL promises it (wal_acked_lsn): snapshots built after
 * a commit wait in `pending` until then.  mem_bytes is the sum of the
 * in-memory segments' bytes. */
struct Table {
    char *dir;                /* owns */
    TableOpts opts;
    QrSchema schema;
    pthread_mutex_t wlock;
    pthread_mutex_t snap_lock;  /* guards snap and pending */
    pthread_mutex_t merge_lock; /* one merge of the file tiers at a time */
    pthread_mutex_t nrt_lock;   /* one merge or flush of the memory tier at a time */
    Snapshot *snap;           /* owns one reference: what readers get */
    Snapshot **pending;       /* owns: built, waiting for the WAL, in lsn order */
    int n_pending, cap_pending;
    uint64_t snap_version;
    WalWriter *wal;           /* owns; NULL while replaying */
    bool broken;              /* a commit's outcome is unknown: writes refused until reopen */
    QrError broken_err;
    _Atomic uint64_t fields_gen; /* bumped by table_add_field: batches re-copy the schema */
    _Atomic uint64_t settings_gen; /* bumped by table_set_synonyms */
    /* committed state */
    int n_segs, cap_segs;
    Segment **segs;           /* owns references */
    roaring_bitmap_t **dels;  /* owns; NULL = none */
    SegMeta *meta;
    bool ckpt_due;            /* committed state differs from the durable manifest */
    _Atomic uint64_t mem_bytes; /* bytes of the in-memory segments */
    int n_mem;                /* in-memory segments */
    /* durability */
    uint64_t next_seg_id;
    uint64_t manifest_gen;
    uint64_t checkpoint_lsn;
    uint64_t wal_at_ckpt;
    /* merges */
    pthread_t merge_thr, nrt_thr;
    bool merge_thr_started, nrt_thr_started;
    pthread_cond_t merge_cv;  /* wakes the merge thread (with wlock) */
    pthread_cond_t nrt_cv;    /* wakes the memory tier's thread (with wlock) */
    bool stop;
    bool merge_due;
    bool nrt_due;
    int merges_running;
    uint64_t merge_retry_at;  /* commits count at which merge_wait is cleared, 0 = none */
    uint64_t merge_retry_gap; /* commits between retries; doubles per failure, up to 1024 */
    pthread_cond_t idle_cv;
    /* counters */
    uint64_t merges_done, merges_failed, commits, checkpoints, recovered, torn_cut;
    uint64_t nrt_merges, nrt_flushes, peak_segments;
    /* what the open found (table_open_report) */
    WalReplayStats open_wal;
    int open_salvaged;
};

/* ---- table.c ---- */
void table_seg_path(char *out, size_t n, const char *dir, uint64_t id);
/* Name an in-memory segment goes by in messages. */
void table_mem_seg_name(char *out, size_t n, const char *dir, uint64_t id);
/* Build a snapshot of the committed state and install it as soon as the
 * WAL promises every commit in it (at once when it already does).  Under
 * wlock.  Errors: QR_ENOMEM (nothing changed). */
int table_publish_locked(Table *t, QrError *err);
/* Install the newest pending snapshot the WAL now promises.  Any thread,
 * wlock held or not. */
void table_install_acked(Table *t);
/* Make the committed file segments, deletes and manifest durable and trim
 * the WAL (table.h "Checkpoint").  Under wlock. */
int table_checkpoint_locked(Table *t, QrError *err);
/* Room for `extra` more committed segments.  Under wlock; -1 on OOM. */
int table_segs_reserve(Table *t, int extra);
/* Remove stale deletes files (files the manifest does not name). */
void table_remove_stale_files(Table *t);

/* ---- table_merge.c ---- */
/* Start / stop the merge threads (background_merge).  Stop: under no lock. */
int table_merge_start(Table *t, QrError *err);
void table_merge_stop(Table *t);
/* A commit happened (under wlock): wake the threads that may have work. */
void table_merge_note_commit_locked(Table *t);
/* After a commit, outside every lock: when the memory tier holds more
 * segments than its bound (its thread is behind, or there is none, as in
 * recovery), merge some of them here before returning. */
void table_merge_relieve(Table *t);
/* Write every in-memory segment to one segment file (a merge), so that
 * the next checkpoint can trim the WAL behind them.  Outside wlock. */
int table_merge_flush_memory(Table *t, QrError *err);
/* Segments left out of merges for want of space or memory are candidates
 * again.  Under wlock. */
void table_merge_clear_wait_locked(Table *t);

#endif
