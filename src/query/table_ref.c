/*
 * table_ref.c — table handles: references on a table's name held by its
 * users, so that a drop waits for them (or gives up cleanly) instead of
 * freeing a handle in use.  See quarry.h "table handles".
 *
 * Layer: query/.  Calls quarry.h and the base kit.
 *
 * One registry for the process, keyed by (db, name): entries exist only
 * while a reference or a drop is pending, so it stays as small as the
 * number of tables in use right now.
 */
#include "query/quarry.h"
#include "store/mem.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef struct TableRef {
    const QrDb *db;
    char name[QR_NAME_MAX + 1];
    int refs;
    bool dropping;
} TableRef;

static pthread_mutex_t ref_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ref_cond = PTHREAD_COND_INITIALIZER;
static TableRef *refs_tab; /* guarded by ref_lock */
static int n_refs, cap_refs;

static TableRef *ref_find(const QrDb *db, const char *name, bool create)
{
    for (int i = 0; i < n_refs; i++)
        if (refs_tab[i].db == db && !strcmp(refs_tab[i].name, name))
            return &refs_tab[i];
    if (!create)
        return NULL;
    if (n_refs == cap_refs) {
        int nc = cap_refs ? cap_refs * 2 : 16;
        TableRef *nt = qr_realloc(refs_tab, (size_t)nc * sizeof *nt);
        if (!nt)
            return NULL;
        refs_tab = nt;
        cap_refs = nc;
    }
    TableRef *r = &refs_tab[n_refs++];
    memset(r, 0, sizeof *r);
    r->db = db;
    snprintf(r->name, sizeof r->name, "%s", name);
    return r;
}

static void ref_gc(TableRef *r)
{
    if (r->refs == 0 && !r->dropping)
        *r = refs_tab[--n_refs];
}

static bool name_ok(const char *name, QrError *err)
{
    if (name && strlen(name) <= QR_NAME_MAX)
        return true;
    qr_error_set(err, QR_EINVAL, "bad table name");
    return false;
}

static int acquire(QrDb *db, const char *name, bool wait, QrTable **out, QrError *err)
{
    if (out)
        *out = NULL;
    if (!name_ok(name, err))
        return QR_EINVAL;
    pthread_mutex_lock(&ref_lock);
    TableRef *r;
    while ((r = ref_find(db, name, true)) && r->dropping) {
        if (!wait) {
            ref_gc(r);
            pthread_mutex_unlock(&ref_lock);
            return qr_error_set(err, QR_EBUSY, "table \"%s\" is being dropped", name);
        }
        pthread_cond_wait(&ref_cond, &ref_lock);
    }
    if (!r) {
        pthread_mutex_unlock(&ref_lock);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    r->refs++;
    pthread_mutex_unlock(&ref_lock);
    if (!out)
        return QR_OK;
    int rc = qr_table_get(db, name, out, err);
    if (rc != QR_OK)
        qr_table_release(db, name);
    return rc;
}

int qr_table_acquire(QrDb *db, const char *name, QrTable **out, QrError *err)
{
    return acquire(db, name, true, out, err);
}

int qr_table_try_acquire(QrDb *db, const char *name, QrTable **out, QrError *err)
{
    return acquire(db, name, false, out, err);
}

void qr_table_release(QrDb *db, const char *name)
{
    if (!name || strlen(name) > QR_NAME_MAX)
        return;
    pthread_mutex_lock(&ref_lock);
    TableRef *r = ref_find(db, name, false);
    if (r && r->refs > 0) {
        r->refs--;
        if (r->refs == 0)
            pthread_cond_broadcast(&ref_cond);
        ref_gc(r);
    }
    pthread_mutex_unlock(&ref_lock);
}

int qr_table_refs(QrDb *db, const char *name)
{
    pthread_mutex_lock(&ref_lock);
    TableRef *r = name ? ref_find(db, name, false) : NULL;
    int n = r ? r->refs : 0;
    pthread_mutex_unlock(&ref_lock);
    return n;
}

/* Wait on ref_cond until `deadline` (CLOCK_REALTIME), forever when NULL;
 * false on timeout. */
static bool ref_wait(const struct timespec *deadline)
{
    if (!deadline) {
        pthread_cond_wait(&ref_cond, &ref_lock);
        return true;
    }
    return pthread_cond_timedwait(&ref_cond, &ref_lock, deadline) != ETIMEDOUT;
}

/* Make `name` exclusive (callers hold ref_lock): wait for a drop or swap of
 * it to end, mark it, and wait until its last reference is gone.  QR_OK,
 * QR_EBUSY on timeout (the mark undone; *users gets the references left),
 * QR_ENOMEM. */
static int ref_claim(const QrDb *db, const char *name, const struct timespec *deadline,
                     int *users)
{
    TableRef *r;
    *users = 0;
    /* one drop of a name at a time */
    while ((r = ref_find(db, name, true)) && r->dropping)
        if (!ref_wait(deadline))
            goto busy;
    if (!r)
        return QR_ENOMEM;
    r->dropping = true;
    while ((r = ref_find(db, name, false))->refs > 0)
        if (!ref_wait(deadline)) {
            r->dropping = false;
            pthread_cond_broadcast(&ref_cond);
            goto busy;
        }
    return QR_OK;
busy:
    r = ref_find(db, name, false);
    *users = r ? r->refs : 0;
    if (r)
        ref_gc(r);
    return QR_EBUSY;
}

/* Undo ref_claim (callers hold ref_lock). */
static void ref_unclaim(const QrDb *db, const char *name)
{
    TableRef *r = ref_find(db, name, false);
    if (r) {
        r->dropping = false;
        ref_gc(r);
    }
    pthread_cond_broadcast(&ref_cond);
}

static struct timespec *deadline_after(uint64_t timeout_ms, struct timespec *dl)
{
    if (!timeout_ms)
        return NULL;
    clock_gettime(CLOCK_REALTIME, dl);
    uint64_t ns = (uint64_t)dl->tv_nsec + (timeout_ms % 1000) * 1000000ull;
    dl->tv_sec += (time_t)(timeout_ms / 1000 + ns / 1000000000ull);
    dl->tv_nsec = (long)(ns % 1000000000ull);
    return dl;
}

static int busy_error(QrError *err, const char *name, int users, uint64_t timeout_ms)
{
    qr_error_set(err, QR_EBUSY, "table \"%s\" is in use by %d request%s", name, users,
                 users == 1 ? "" : "s");
    qr_error_detail(err, "they did not finish within %llu ms", (unsigned long long)timeout_ms);
    qr_error_hint(err, "retry when they have finished");
    return QR_EBUSY;
}

int qr_table_claim(QrDb *db, const char *name, uint64_t timeout_ms, QrError *err)
{
    if (!name_ok(name, err))
        return QR_EINVAL;
    struct timespec dl;
    const struct timespec *deadline = deadline_after(timeout_ms, &dl);
    int users;
    pthread_mutex_lock(&ref_lock);
    int rc = ref_claim(db, name, deadline, &users);
    pthread_mutex_unlock(&ref_lock);
    if (rc)
        return rc == QR_EBUSY ? busy_error(err, name, users, timeout_ms)
                              : qr_error_set(err, QR_ENOMEM, "out of memory");
    return QR_OK;
}

void qr_table_unclaim(QrDb *db, const char *name)
{
    pthread_mutex_lock(&ref_lock);
    ref_unclaim(db, name);
    pthread_mutex_unlock(&ref_lock);
}

int qr_table_drop_wait(QrDb *db, const char *name, uint64_t timeout_ms, QrError *err)
{
    int rc = qr_table_claim(db, name, timeout_ms, err);
    if (rc)
        return rc;
    rc = qr_table_drop(db, name, err);
    qr_table_unclaim(db, name);
    return rc;
}

int qr_table_swap_wait(QrDb *db, const char *a_in, const char *b_in, uint64_t timeout_ms,
                       QrError *err)
{
    if (!name_ok(a_in, err) || !name_ok(b_in, err))
        return QR_EINVAL;
    /* copies: a name may live in a handle the swap frees */
    char a[QR_NAME_MAX + 1], b[QR_NAME_MAX + 1];
    snprintf(a, sizeof a, "%s", a_in);
    snprintf(b, sizeof b, "%s", b_in);
    struct timespec dl;
    const struct timespec *deadline = deadline_after(timeout_ms, &dl);
    int users;
    pthread_mutex_lock(&ref_lock);
    const char *busy = a;
    int rc = ref_claim(db, a, deadline, &users);
    if (rc == QR_OK && (rc = ref_claim(db, busy = b, deadline, &users)) != QR_OK)
        ref_unclaim(db, a);
    pthread_mutex_unlock(&ref_lock);
    if (rc)
        return rc == QR_EBUSY ? busy_error(err, busy, users, timeout_ms)
                              : qr_error_set(err, QR_ENOMEM, "out of memory");
    rc = qr_table_swap(db, a, b, err);
    pthread_mutex_lock(&ref_lock);
    ref_unclaim(db, a);
    ref_unclaim(db, b);
    pthread_mutex_unlock(&ref_lock);
    return rc;
}
