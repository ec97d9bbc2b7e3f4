/*
 * check_cmd.c — `quarry check`: verify every table of a data directory, or
 * salvage them when asked; and `quarry tables`, which lists them the same
 * way (check_cmd.h).
 *
 * Layer: server/.  Calls query/quarry.h and the base kit.
 *
 * Opening a table verifies every checksum of its segments, deletes files
 * and manifest and replays its WAL (index/table.c); the check open is
 * read-only, so a torn WAL tail is reported and left for the next writable
 * open, and with QrDbOpts.check the B-tree side files are verified too.
 * One line per table: "NAME: ok, ..." or "NAME: DAMAGED: message" with the
 * detail and hint indented below.
 */
#include "server/check_cmd.h"

#include "query/quarry.h"
#include "server/cli.h"
#include "store/util.h"

#include <stdio.h>
#include <string.h>

static int usage(void)
{
    fprintf(stderr, "usage: quarry check [--salvage] --data DIR\n"
                    "  verifies every table and changes nothing; with --salvage, sets\n"
                    "  damaged segments and damaged WAL files aside (as *.damaged) and\n"
                    "  keeps everything before the damage\n");
    return 2;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* The notes under an "ok" line: what the open found and did. */
static void print_report(const QrOpenReport *r, bool salvage)
{
    const WalReplayStats *w = &r->wal;
    if (w->torn_bytes)
        printf("  note: WAL file %s ends in a torn write: %llu bytes at offset %llu (%s), "
               "never acknowledged; %s\n",
               base_name(w->torn_file), (unsigned long long)w->torn_bytes,
               (unsigned long long)w->torn_off, w->torn_why,
               salvage ? "cut" : "the next writable open cuts them");
    if (r->uncommitted_bytes)
        printf("  note: the WAL ends in %llu bytes of a batch without its COMMIT record, "
               "never acknowledged; %s\n",
               (unsigned long long)r->uncommitted_bytes,
               salvage ? "discarded" : "the next writable open discards them");
    if (r->segments_salvaged)
        printf("  salvaged: left out %d damaged segment(s), kept as seg-*.qseg.damaged\n",
               r->segments_salvaged);
    if (w->salvaged_bytes)
        printf("  salvaged: set aside %llu WAL bytes from offset %llu of %s on, kept as "
               "*.damaged; the changes after that point are not in the table\n",
               (unsigned long long)w->salvaged_bytes, (unsigned long long)w->salvage_off,
               base_name(w->salvage_file));
}

/* Open every table of `data` and print a line for each: check (read-only,
 * everything verified; with salvage, writable and salvaging) or a plain
 * listing (read-only; salvage leaves damaged segments out). */
static int each_table(const char *data, bool check, bool salvage)
{
    QrDbOpts o;
    qr_db_opts_default(&o);
    o.background_merge = false;
    o.salvage = salvage;
    o.check = check && !salvage;  /* read-only, B-trees verified */
    o.read_only = !check;         /* a listing never writes; check --salvage does */
    QrError err;
    qr_error_clear(&err);
    QrDb *db;
    if (qr_db_open(data, &o, &db, &err) != QR_OK) {
        cli_print_error(stderr, &err);
        return 1;
    }
    char **names;
    int n;
    if (qr_table_list(db, &names, &n, &err) != QR_OK) {
        cli_print_error(stderr, &err);
        qr_db_close(db);
        return 1;
    }
    int bad = 0;
    for (int i = 0; i < n; i++) {
        QrTable *t;
        qr_error_clear(&err);
        if (qr_table_get(db, names[i], &t, &err) != QR_OK) {
            printf("%s: DAMAGED: %s\n", names[i], err.message);
            if (err.detail[0])
                printf("  detail: %s\n", err.detail);
            if (err.hint[0])
                printf("  hint: %s\n", err.hint);
            bad++;
        } else {
            QrTableStats st;
            qr_table_stats(t, &st);
            QrOpenReport r;
            qr_table_open_report(t, &r);
            bool salvaged = r.segments_salvaged || r.wal.salvaged_bytes;
            printf("%s: %s%llu docs, %llu segments, %.1f MB\n", names[i],
                   !check ? "" : salvaged ? "salvaged, " : "ok, ", (unsigned long long)st.docs,
                   (unsigned long long)st.segments, (double)st.disk_bytes / 1e6);
            if (check)
                print_report(&r, salvage);
        }
        qr_free(names[i]);
    }
    qr_free(names);
    qr_db_close(db);
    return bad ? 1 : 0;
}

/* argv: the arguments after the command name. */
static int run(int argc, char **argv, bool check)
{
    const char *data = "./data";
    bool salvage = false;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--data") && i + 1 < argc)
            data = argv[++i];
        else if (!strncmp(argv[i], "--data=", 7))
            data = argv[i] + 7;
        else if (!strcmp(argv[i], "--salvage"))
            salvage = true;
        else {
            fprintf(stderr, "quarry %s: unexpected argument \"%s\"\n", check ? "check" : "tables",
                    argv[i]);
            return check ? usage() : 2;
        }
    }
    return each_table(data, check, salvage);
}

int check_cmd_main(int argc, char **argv) { return run(argc, argv, true); }

int tables_cmd_main(int argc, char **argv) { return run(argc, argv, false); }
