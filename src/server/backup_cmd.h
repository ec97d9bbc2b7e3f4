/*
 * backup_cmd.h — `quarry backup --data DIR --to DEST`.
 *
 * Layer: server/.
 */
#ifndef QR_BACKUP_CMD_H
#define QR_BACKUP_CMD_H

/* Exit status: 0 done (the copy verified), 1 error, 2 usage. */
int backup_cmd_main(int argc, char **argv);

#endif
