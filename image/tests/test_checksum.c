/* SPDX-License-Identifier: MIT */
/* The checksum is XXH3-64 (seed 0): known answers from the reference
 * implementation, for every stripe kernel this CPU has, one-shot and
 * streamed in pieces of every awkward size. */
#include "checksum.h"

#include <criterion/criterion.h>
#include <stdint.h>

static const struct {
    size_t len;
    uint64_t want;
} known[] = {
    {0, UINT64_C(0x2d06800538d394c2)},    {1, UINT64_C(0x4c5cca45d0f4811f)},
    {3, UINT64_C(0x15f7093b173d005c)},    {4, UINT64_C(0xdca012f95811b6b9)},
    {8, UINT64_C(0xdec6a9a43575982e)},    {9, UINT64_C(0xcbe393399f17ffbd)},
    {16, UINT64_C(0x7e484c18d74895d0)},   {17, UINT64_C(0x208bde5ee2bed407)},
    {128, UINT64_C(0xf92b70eaa21a6288)},  {129, UINT64_C(0xf8f76713f2bb60fa)},
    {240, UINT64_C(0xccc7375172c41f03)},  {241, UINT64_C(0x0b3b630948ce4a00)},
    {1024, UINT64_C(0x23bc880ebf0d29c6)}, {1025, UINT64_C(0xc09fdfbc398c7d82)},
    {5000, UINT64_C(0x559fff92c2b7f8ee)},
};

static unsigned char data[5000];

static void fill(void)
{
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (unsigned char)(i * 31 + 7);
}

Test(checksum, known_answers_for_every_kernel)
{
    fill();
    for (int k = 1; k <= 3; k++) {
        int used = img_hash_kernel(k);
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
            cr_assert_eq(img_hash(data, known[i].len), known[i].want, "kernel %d, %zu bytes", used,
                         known[i].len);
            /* streamed: pieces of 1, 7, 63, 64, 65, 255, 256, 257 bytes */
            static const size_t pieces[] = {1, 7, 63, 64, 65, 255, 256, 257};
            for (size_t p = 0; p < sizeof pieces / sizeof pieces[0]; p++) {
                struct img_hash h;
                img_hash_init(&h);
                for (size_t at = 0; at < known[i].len; at += pieces[p])
                    img_hash_update(&h, data + at,
                                    known[i].len - at < pieces[p] ? known[i].len - at : pieces[p]);
                cr_assert_eq(img_hash_final(&h), known[i].want, "kernel %d, %zu bytes by %zu", used,
                             known[i].len, pieces[p]);
            }
        }
    }
    img_hash_kernel(0);
}
