/*
 * secret_file.h — the small JSON files of a data directory that hold
 * credentials (api_keys.json; pg_users.json could share it): read as
 * {"<member>": [...]}, written atomically, fsynced, with mode 0600 from the
 * moment the file exists.
 *
 * Layer: server/.  Calls the base kit and cJSON.
 */
#ifndef QR_SECRET_FILE_H
#define QR_SECRET_FILE_H

#include <stdbool.h>
#include <stddef.h>

#include "store/error.h"

struct cJSON;

/* Parse `path` as an object whose `member` is an array.  *root owns the
 * tree (cJSON_Delete it), *arr borrows the array.  An absent file is QR_OK
 * with both NULL.  QR_ESYNTAX "malformed <label> <file name>" otherwise, the
 * read's errors (QR_EIO) as they come. */
int secret_file_read(const char *path, const char *member, const char *label,
                     struct cJSON **root, struct cJSON **arr, QrError *err);
/* Print `root` to `path` (tmp + rename + fsync) with mode 0600. */
int secret_file_write(const char *path, const struct cJSON *root, QrError *err);

/* A credential's name (API key, PG user): 1 to max_len letters, digits,
 * '_', '-' or '.'. */
bool secret_name_valid(const char *name, size_t max_len);

#endif
