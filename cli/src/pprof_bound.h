/* SPDX-License-Identifier: MIT */
/* Internal to the mimprof command's pprof reader: how much memory
 * protobuf-c would allocate to unpack a pprof message, computed from the
 * wire bytes without allocating, so that a small input that expands
 * enormously (an empty Sample is 2 bytes on the wire and ~90 bytes
 * unpacked: a 40 KB .pb.gz of 20 million of them needed 2.5 GB) is
 * refused before it is unpacked. */
#ifndef MIMPROF_TOOL_PPROF_BOUND_H
#define MIMPROF_TOOL_PPROF_BOUND_H

#include <stddef.h>
#include <stdint.h>

/* An upper estimate of the bytes perftools__profiles__profile__unpack()
 * allocates for data[0..len): every message and repeated element counted
 * at its unpacked size. SIZE_MAX when the wire data is malformed (the
 * unpacker would refuse it too). */
size_t mpt_pprof_decoded_size(const uint8_t *data, size_t len);

#endif
