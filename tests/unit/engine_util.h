/*
 * engine_util.h — shared helpers of the engine tests (test_search,
 * test_segment, test_table): seeded randomness, Zipf vocabularies and
 * random documents, temporary directories, a bookkeeping model of the live
 * documents of a table, and a brute-force in-memory index built by running
 * the schema's analyzers over stored JSON (the model the engine's postings,
 * norms and statistics are checked against).
 *
 * A virtual clock replaces the engine's monotonic one, so that tests of
 * deadlines decide when time passes instead of timing a busy machine.
 *
 * Linked into every unit test binary: every symbol is prefixed eu_.
 */
#ifndef QR_ENGINE_UTIL_H
#define QR_ENGINE_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "index/analyzer.h"
#include "index/segment.h"
#include "index/table.h"
#include "store/schema.h"

/* ---- randomness ---- */

uint64_t eu_rand(uint64_t *state);               /* splitmix64 */
uint64_t eu_below(uint64_t *state, uint64_t n);   /* uniform in [0, n), n > 0 */
bool eu_chance(uint64_t *state, double p);

/* Zipf(s) over ranks 0..n-1. */
typedef struct EuZipf {
    int n;
    double *cdf; /* owns */
} EuZipf;
/* Optimal string alignment distance (Levenshtein plus adjacent
 * transpositions) of two code point strings, by the full matrix: the
 * distance td_fuzzy promises, for brute-force models. */
int eu_osa(const uint32_t *a, size_t an, const uint32_t *b, size_t bn);

void eu_zipf_init(EuZipf *z, int n, double s);
int eu_zipf_draw(const EuZipf *z, uint64_t *state);
void eu_zipf_free(EuZipf *z);

/* n distinct pronounceable lowercase words (a..z only, 2..9 letters, never
 * "and"/"or"/"not"), deterministic for a seed.  Free with eu_words_free. */
char **eu_words(int n, uint64_t seed);
void eu_words_free(char **w, int n);

/* ---- random documents ---- */

/* The schema of eu_random_doc's documents (primary key "id"):
 *   title  text, english stemming, weight 2
 *   body   text, no stemming (a string, or sometimes an array of strings)
 *   n      int      price  float      flag  bool
 *   ts     timestamp                  cat   keyword
 *   label  text (no stemming) also kept as a keyword column
 * with_columns = false leaves out the non-text fields. */
void eu_random_schema(QrSchema *s, bool with_columns);
/* A random JSON document with primary key id_json (JSON text: 42 or "k42").
 * Text is drawn from words[] through the Zipf table; fields are sometimes
 * missing or null; with dup_of non-NULL, title and body are copied from
 * that document instead (exact ties).  malloc'd. */
char *eu_random_doc(uint64_t *rng, char *const *words, const EuZipf *z, const char *id_json,
                    const char *dup_of);
/* n words drawn from the Zipf table, space separated, into out (malloc'd). */
char *eu_random_text(uint64_t *rng, char *const *words, const EuZipf *z, int n);

/* ---- a virtual clock ---- */

/* Make qr_now_ns() (qr_clock_set_source) a virtual clock that starts at 1 s
 * and moves step_ns forward at every read, whatever the real time: a query
 * with a deadline D ns after its start sees it pass at its
 * (D / step_ns + 1)-th clock read, on a quiet machine or a loaded one.
 * step_ns = 0 stops time.  Thread-safe.  eu_clock_real() restores the system
 * clock; eu_clock_reads() counts the reads since eu_clock_virtual(). */
void eu_clock_virtual(uint64_t step_ns);
void eu_clock_real(void);
uint64_t eu_clock_reads(void);

/* ---- files ---- */

/* A fresh directory (under $TMPDIR, else /dev/shm, else /tmp); malloc'd. */
char *eu_tmpdir(const char *tag);
void eu_rmtree(const char *path);
/* A temporary directory removed (and freed) by eu_tmpdirs_cleanup, which a
 * test suite names as its .fini; eu_quiet is the matching .init (errors
 * only in the log). */
char *eu_tmpdir_tracked(const char *tag);
void eu_tmpdirs_cleanup(void);
void eu_quiet(void);
/* Recursive copy of a directory of regular files (a "crash image"). */
void eu_copy_tree(const char *src, const char *dst);
/* Newest (highest-named) WAL file of a table directory, malloc'd, or NULL. */
char *eu_newest_wal(const char *table_dir);
off_t eu_file_size(const char *path);

/* Read a JSONL corpus (plain or .gz) into an array of lines (malloc'd
 * strings, at most max_docs); returns the count, 0 when the file is absent. */
int eu_read_jsonl(const char *path, int max_docs, char ***lines_out);
void eu_lines_free(char **lines, int n);

/* ---- writing through the front door ---- */

struct QrTable;
/* Put docs[0..n) (JSON text, freed here) into table t in one committed
 * batch; asserts every step. */
void eu_put_docs(struct QrTable *t, char **docs, int n);
/* Delete n random integer keys drawn from [0, space) in one committed
 * batch (absent keys are no-ops); asserts every step. */
void eu_delete_random(struct QrTable *t, uint64_t *rng, int n, int64_t space);

/* ---- the live-document model of a table ---- */

typedef struct EuStoreEnt {
    uint8_t key[PK_KEY_MAX];
    size_t key_len;
    char *json; /* owns; NULL = deleted / absent */
} EuStoreEnt;

typedef struct EuStore {
    EuStoreEnt *ents; /* owns */
    int n, cap;
    int *slots;       /* open addressing: ent index + 1 */
    int n_slots;
} EuStore;

void eu_store_init(EuStore *s);
void eu_store_free(EuStore *s);
/* Deep copy (for "state after commit k" checkpoints). */
void eu_store_copy(EuStore *dst, const EuStore *src);
/* Upsert / delete by key bytes (pk_encode form). */
void eu_store_put(EuStore *s, const uint8_t *key, size_t key_len, const char *json);
void eu_store_del(EuStore *s, const uint8_t *key, size_t key_len);
const char *eu_store_get(const EuStore *s, const uint8_t *key, size_t key_len);
int eu_store_live(const EuStore *s);
/* Key bytes of a JSON document's primary key "id" (asserts it is valid). */
size_t eu_doc_key(const char *json, uint8_t *key);

/* Assert that the live documents of the snapshot (every segment, minus
 * deletes) are exactly the model's: same keys, same stored JSON, each key
 * live once.  `what` prefixes failure messages. */
void eu_assert_snapshot_is(const Snapshot *snap, const EuStore *model, const char *what);
/* The same test without asserting: true when equal, else false with the
 * first difference in why. */
bool eu_snapshot_equals(const Snapshot *snap, const EuStore *model, char *why, size_t why_len);

/* ---- the brute-force index ---- */

typedef struct EuOcc {
    uint32_t doc;     /* index into EuIndex.docs */
    uint32_t tf;
    uint32_t pos_off; /* into EuIndex.pos */
} EuOcc;

typedef struct EuTerm {
    uint8_t *key;     /* owns: field byte + term bytes */
    uint32_t key_len;
    EuOcc *occ;       /* owns: ascending doc */
    uint32_t n_occ, cap_occ;
    uint64_t total_tf;
} EuTerm;

/* A word form (SEC_SURFACES): the word as written, folded but not
 * stemmed, of a stemmed field (or "_all") in one segment, and the term it
 * was indexed as there (the least one, when a form of "_all" came from
 * fields analyzed differently). */
typedef struct EuForm {
    uint8_t *key;     /* owns: field byte + form bytes */
    uint32_t key_len;
    int seg;
    uint32_t term;    /* index into EuIndex.terms */
} EuForm;

typedef struct EuDoc {
    char *json;         /* owns */
    size_t json_len;
    uint8_t key[PK_KEY_MAX];
    size_t key_len;
    bool live;
    int seg;            /* segment index in the snapshot (or caller's group) */
    uint32_t local;     /* doc id within that segment */
    int64_t gdoc;       /* global doc id */
    uint32_t *norms;    /* owns: tokens per field (n_fields entries) */
    uint32_t all_norm;  /* tokens of the combined "_all" field */
} EuDoc;

typedef struct EuIndex {
    const QrSchema *schema; /* borrows */
    Analyzer *an[QR_MAX_FIELDS]; /* owns; NULL for non-indexed fields */
    EuDoc *docs;            /* owns, in global doc order */
    uint32_t n_docs, cap_docs;
    EuTerm *terms;          /* owns */
    uint32_t n_terms, cap_terms;
    uint32_t *slots;        /* term index + 1 */
    uint32_t n_slots;
    uint32_t *pos;          /* owns: positions pool */
    size_t n_pos, cap_pos;
    /* after eu_index_finish; index QR_ALL_FIELD is "_all" (when the schema
     * has all_field: every text field's words, fields 100 positions apart) */
    uint64_t field_total[256];
    uint32_t field_docs[256];
    int n_segs;
    uint32_t **seg_terms;   /* owns: per segment, term indexes sorted by key */
    uint32_t *seg_n_terms;  /* owns */
    uint32_t *sorted;       /* owns: all term indexes sorted by key */
    /* word forms of stemmed fields, per segment */
    bool stems[QR_MAX_FIELDS];
    bool any_stems;
    EuForm *forms;          /* owns */
    uint32_t n_forms, cap_forms;
    uint32_t *form_slots;   /* form index + 1 */
    uint32_t n_form_slots;
    uint32_t **seg_forms;   /* owns: per segment, form indexes sorted by key */
    uint32_t *seg_n_forms;  /* owns */
} EuIndex;

void eu_index_init(EuIndex *ix, const QrSchema *schema);
void eu_index_free(EuIndex *ix);
/* Add a document (JSON text, analyzed like segbuild.c does: arrays of
 * strings get a position gap of 100 between values). */
void eu_index_add(EuIndex *ix, const char *json, size_t len, bool live, int seg, uint32_t local,
                  int64_t gdoc);
void eu_index_finish(EuIndex *ix);
/* Every doc of every segment of the snapshot (deleted ones too, with
 * live = false), in global doc order; finished. */
void eu_index_from_snapshot(EuIndex *ix, const Snapshot *snap, const QrSchema *schema);
/* Replace the word forms (computed from the documents by eu_index_add)
 * with those the snapshot's segments hold (SEC_SURFACES), for models of
 * searches after merges, whose forms may outlive their deleted documents.
 * Forms naming a term no document has are left out. */
void eu_index_load_forms(EuIndex *ix, const Snapshot *snap);
/* Tokens of a field of doc d (field may be QR_ALL_FIELD). */
uint32_t eu_doc_norm(const EuIndex *ix, uint32_t d, int field);
/* The analyzer queries use for a field ("_all": the first text field's). */
Analyzer *eu_field_analyzer(const EuIndex *ix, int field);
/* Whether words of `field` expand through word forms (it stems; "_all":
 * some field does), as search.c decides. */
bool eu_field_has_forms(const EuIndex *ix, int field);
/* The term [field][text], or NULL. */
const EuTerm *eu_index_term(const EuIndex *ix, int field, const char *text, size_t len);
/* The occurrence of term t in doc, or NULL (binary search). */
const EuOcc *eu_term_occ(const EuTerm *t, uint32_t doc);

/* Assert that one segment's term dictionary, postings (docs, freqs,
 * positions), norms and field statistics agree with a re-analysis of its
 * own stored documents, and that its primary keys are those of the stored
 * JSON.  `what` prefixes failure messages. */
void eu_assert_segment_consistent(const Segment *seg, const QrSchema *schema, const char *what);

#endif
