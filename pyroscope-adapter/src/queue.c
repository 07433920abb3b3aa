/* SPDX-License-Identifier: MIT */
/* The bounded FIFO of profiles waiting for upload. */
#include "queue.h"

#include <stdlib.h>
#include <string.h>

void mp_pyro_item_free(mp_pyro_item *it)
{
    free(it->gz);
    memset(it, 0, sizeof *it);
}

mp_pyro_status mp_pyro_queue_init(mp_pyro_queue *q, size_t cap)
{
    memset(q, 0, sizeof *q);
    q->slots = calloc(cap + 1, sizeof *q->slots);
    if (!q->slots)
        return MP_PYRO_E_NOMEM;
    q->nslots = cap + 1;
    q->cap = cap;
    return MP_PYRO_OK;
}

void mp_pyro_queue_destroy(mp_pyro_queue *q)
{
    mp_pyro_item it;
    while (mp_pyro_queue_pop_front(q, &it))
        mp_pyro_item_free(&it);
    free(q->slots);
    memset(q, 0, sizeof *q);
}

bool mp_pyro_queue_full(const mp_pyro_queue *q) { return q->len >= q->cap; }

void mp_pyro_queue_push_back(mp_pyro_queue *q, mp_pyro_item it)
{
    q->slots[(q->head + q->len) % q->nslots] = it;
    q->len++;
}

void mp_pyro_queue_push_front(mp_pyro_queue *q, mp_pyro_item it)
{
    q->head = (q->head + q->nslots - 1) % q->nslots;
    q->slots[q->head] = it;
    q->len++;
}

bool mp_pyro_queue_pop_front(mp_pyro_queue *q, mp_pyro_item *out)
{
    if (q->len == 0)
        return false;
    *out = q->slots[q->head];
    memset(&q->slots[q->head], 0, sizeof q->slots[0]);
    q->head = (q->head + 1) % q->nslots;
    q->len--;
    return true;
}

const mp_pyro_item *mp_pyro_queue_front(const mp_pyro_queue *q)
{
    return q->len ? &q->slots[q->head] : NULL;
}
