/*
 * backup_cmd.c — `quarry backup`: an online, verified copy of a data
 * directory (query/backup.h).  Works while `quarry serve` runs on the same
 * directory: it reads files, it never takes the directory's lock.
 *
 * Layer: server/.
 */
#include "server/backup_cmd.h"

#include "query/backup.h"
#include "store/util.h"

#include <stdio.h>
#include <string.h>

static int usage(void)
{
    fprintf(stderr, "usage: quarry backup --data DIR --to DEST\n"
                    "  copies DIR (online: a server may be running on it) to the new\n"
                    "  directory DEST and verifies the copy; restore by using DEST as --data.\n"
                    "  The copy is built in DEST.incomplete and renamed to DEST when verified\n");
    return 2;
}

int backup_cmd_main(int argc, char **argv)
{
    const char *data = "./data", *to = NULL;
    for (int i = 0; i < argc; i++) { /* argv: the arguments after "backup" */
        if ((!strcmp(argv[i], "--data") || !strcmp(argv[i], "--to")) && i + 1 < argc) {
            if (!strcmp(argv[i], "--data"))
                data = argv[++i];
            else
                to = argv[++i];
        } else if (!strncmp(argv[i], "--data=", 7)) {
            data = argv[i] + 7;
        } else if (!strncmp(argv[i], "--to=", 5)) {
            to = argv[i] + 5;
        } else {
            fprintf(stderr, "quarry backup: unexpected argument \"%s\"\n", argv[i]);
            return usage();
        }
    }
    if (!to)
        return usage();
    QrError e;
    qr_error_clear(&e);
    QrBackupStats st;
    QrBuf report;
    qr_buf_init(&report);
    int rc = qr_backup(data, to, &st, &report, &e);
    if (rc != QR_OK) {
        fprintf(stderr, "quarry backup: %s\n", e.message);
        if (e.detail[0])
            fprintf(stderr, "DETAIL: %s\n", e.detail);
        if (e.hint[0])
            fprintf(stderr, "HINT: %s\n", e.hint);
        qr_buf_free(&report);
        return 1;
    }
    printf("{\"to\":\"%s\",\"tables\":%u,\"docs\":%llu,\"segments\":%llu,\"linked\":%llu,"
           "\"copied\":%llu,\"bytes\":%llu,\"wal_files\":%llu,\"btrees_left_out\":%llu,"
           "\"max_attempts\":%u,\"took_ms\":%.1f,\"verified\":true,\"per_table\":[%.*s]}\n",
           to, st.tables, (unsigned long long)st.docs, (unsigned long long)st.segments,
           (unsigned long long)st.linked, (unsigned long long)st.copied,
           (unsigned long long)st.bytes, (unsigned long long)st.wal_files,
           (unsigned long long)st.btrees_left_out, st.max_attempts,
           st.took_ms, (int)report.len, report.data ? (const char *)report.data : "");
    qr_buf_free(&report);
    return 0;
}
