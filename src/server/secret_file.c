/*
 * secret_file.c — credential files of a data directory (secret_file.h).
 *
 * Layer: server/.  Calls the base kit and cJSON.
 */
#include "server/secret_file.h"
#include "store/mem.h"
#include "store/util.h"

#include <cJSON.h>
#include <string.h>

int secret_file_read(const char *path, const char *member, const char *label, cJSON **root,
                     cJSON **arr, QrError *err)
{
    *root = NULL;
    *arr = NULL;
    if (!qr_path_exists(path))
        return QR_OK;
    uint8_t *text = NULL;
    size_t len = 0;
    int rc = qr_file_read_all(path, &text, &len, err);
    if (rc != QR_OK)
        return rc;
    cJSON *r = cJSON_ParseWithLength((const char *)text, len);
    qr_free(text);
    cJSON *a = r ? cJSON_GetObjectItemCaseSensitive(r, member) : NULL;
    if (!cJSON_IsArray(a)) {
        cJSON_Delete(r);
        const char *base = strrchr(path, '/');
        qr_error_set(err, QR_ESYNTAX, "malformed %s %s", label, base ? base + 1 : path);
        qr_error_detail(err, "expected {\"%s\": [...]}", member);
        return QR_ESYNTAX;
    }
    *root = r;
    *arr = a;
    return QR_OK;
}

int secret_file_write(const char *path, const cJSON *root, QrError *err)
{
    char *text = cJSON_Print(root);
    if (!text)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    /* the temporary file is created 0600 too, so no reader ever sees it open */
    int rc = qr_file_write_atomic_mode(path, text, strlen(text), true, 0600, err);
    cJSON_free(text);
    return rc;
}

bool secret_name_valid(const char *name, size_t max_len)
{
    size_t len = strlen(name);
    if (len == 0 || len > max_len)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!(c == '_' || c == '-' || c == '.' || (c >= '0' && c <= '9') ||
              (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
            return false;
    }
    return true;
}
