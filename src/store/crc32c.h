/*
 * crc32c.h — CRC-32C (Castagnoli), the checksum of every WAL record and
 * segment file block.  Layer: store/ (base kit).
 *
 * Uses the SSE4.2 crc32 instruction when the CPU has it (checked once at
 * run time), a slice-by-8 table otherwise; both give identical results.
 */
#ifndef QR_CRC32C_H
#define QR_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Extend `crc` (0 to start) over n bytes. */
uint32_t qr_crc32c(uint32_t crc, const void *data, size_t n);

#endif
