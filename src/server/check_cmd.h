/*
 * check_cmd.h — `quarry check [--salvage] --data DIR` and
 * `quarry tables [--salvage] --data DIR`.
 *
 * Layer: server/.
 */
#ifndef QR_CHECK_CMD_H
#define QR_CHECK_CMD_H

/* Without --salvage: verify every table and change nothing.  Exit 0 when
 * every table is intact (a torn WAL tail is noted, not damage), 1 when one
 * is damaged, the directory is not a data directory or is an incomplete
 * backup, 2 usage.  With --salvage: open every table for writing with
 * damaged segments and damaged WAL tails set aside (docs/operations.md),
 * report what was set aside; exit 1 if a table still does not open. */
int check_cmd_main(int argc, char **argv);

/* One line per table (docs, segments, size), read-only; a table that does
 * not open is listed as DAMAGED.  Exit 0, or 1 when one is damaged. */
int tables_cmd_main(int argc, char **argv);

#endif
