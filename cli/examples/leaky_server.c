/* SPDX-License-Identifier: MIT */
/* mimprof-example: a toy request loop with distinct allocation sites, one
 * of them a leak that grows. Plain malloc/free: it knows nothing of
 * mimprof; run it under `mimprof run` (./dev demo does).
 *
 *   load_config       once at start: 1 MiB kept for the whole run
 *   parse_request     per request: a 2 KiB buffer and 16 small tokens, freed
 *   render_response   per request: a 16 KiB response, freed
 *   cache_store       per request: an 8 KiB entry in a 256-entry cache that
 *                     evicts the oldest (steady 2 MiB in use)
 *   remember_session  per request: an 8 KiB session record appended to a
 *                     list nobody frees -- the leak (ROUNDS * 8 KiB)
 *
 * usage: mimprof-example [--rounds N] [--sleep-us U] [--checkpoints K]
 *   --rounds N       requests to serve (default 4000)
 *   --sleep-us U     pause after each request (default 1000)
 *   --checkpoints K  ask for a report K-1 times at equal intervals, by
 *                    raising SIGUSR2 -- only when a mimprof preload object
 *                    is loaded (it takes SIGUSR2 at its default action as
 *                    a report request; the program still sees SIG_DFL, so
 *                    asking sigaction() would not tell), then pausing 300 ms
 *
 * At the end it prints, on stderr, the bytes each long-lived site holds.
 */
#define _GNU_SOURCE
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))

enum {
    CONFIG_BYTES = 1 << 20,
    REQUEST_BYTES = 2 << 10,
    TOKENS = 16,
    RESPONSE_BYTES = 16 << 10,
    CACHE_SLOTS = 256,
    CACHE_ENTRY_BYTES = 8 << 10,
    SESSION_BYTES = 8 << 10,
};

struct session {
    struct session *next;
    unsigned id;
    char data[SESSION_BYTES - sizeof(struct session *) - sizeof(unsigned)];
};

static struct session *sessions; /* the leak: only ever grows */
static char *cache[CACHE_SLOTS];
static size_t cache_next;
static volatile unsigned long sink; /* keeps the work from being optimised away */

NOINLINE char *load_config(void)
{
    char *cfg = malloc(CONFIG_BYTES);
    if (cfg == NULL)
        abort();
    memset(cfg, 'c', CONFIG_BYTES);
    return cfg;
}

NOINLINE char **parse_request(unsigned id, char **buf_out)
{
    char *buf = malloc(REQUEST_BYTES);
    char **tokens = malloc(TOKENS * sizeof *tokens);
    if (buf == NULL || tokens == NULL)
        abort();
    int n = snprintf(buf, REQUEST_BYTES, "GET /item/%u HTTP/1.1", id);
    for (int i = 0; i < TOKENS; i++) {
        tokens[i] = malloc(32);
        if (tokens[i] == NULL)
            abort();
        snprintf(tokens[i], 32, "t%d:%.*s", i, n > 8 ? 8 : n, buf);
    }
    *buf_out = buf;
    return tokens;
}

NOINLINE char *render_response(unsigned id, char **tokens)
{
    char *resp = malloc(RESPONSE_BYTES);
    if (resp == NULL)
        abort();
    memset(resp, ' ', RESPONSE_BYTES);
    snprintf(resp, RESPONSE_BYTES, "200 OK item %u %s", id, tokens[0]);
    return resp;
}

NOINLINE void cache_store(unsigned id, const char *resp)
{
    char *entry = malloc(CACHE_ENTRY_BYTES);
    if (entry == NULL)
        abort();
    memcpy(entry, resp, CACHE_ENTRY_BYTES);
    entry[0] = (char)id;
    free(cache[cache_next]);
    cache[cache_next] = entry;
    cache_next = (cache_next + 1) % CACHE_SLOTS;
}

NOINLINE void remember_session(unsigned id)
{
    struct session *s = malloc(sizeof *s);
    if (s == NULL)
        abort();
    memset(s->data, (int)(id & 0x7f), sizeof s->data);
    s->id = id;
    s->next = sessions;
    sessions = s;
}

NOINLINE void handle_request(unsigned id)
{
    char *buf;
    char **tokens = parse_request(id, &buf);
    char *resp = render_response(id, tokens);
    cache_store(id, resp);
    remember_session(id);
    sink += (unsigned char)resp[3] + (unsigned char)buf[0];
    free(resp);
    for (int i = 0; i < TOKENS; i++)
        free(tokens[i]);
    free(tokens);
    free(buf);
}

static int is_mimprof_preload(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    return info->dlpi_name != NULL && strstr(info->dlpi_name, "libmimprof-preload-") != NULL;
}

static void checkpoint(void)
{
    struct sigaction sa;
    if (dl_iterate_phdr(is_mimprof_preload, NULL) == 0 || sigaction(SIGUSR2, NULL, &sa) != 0 ||
        sa.sa_handler != SIG_DFL)
        return; /* no profiler, or the program's own SIGUSR2 */
    raise(SIGUSR2);
    struct timespec ts = {0, 300 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

static unsigned long arg_value(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "mimprof-example: %s needs a value\n", argv[*i]);
        exit(2);
    }
    char *end;
    unsigned long v = strtoul(argv[++*i], &end, 10);
    if (*end != '\0') {
        fprintf(stderr, "mimprof-example: bad value '%s'\n", argv[*i]);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    unsigned long rounds = 4000, sleep_us = 1000, checkpoints = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rounds") == 0)
            rounds = arg_value(argc, argv, &i);
        else if (strcmp(argv[i], "--sleep-us") == 0)
            sleep_us = arg_value(argc, argv, &i);
        else if (strcmp(argv[i], "--checkpoints") == 0)
            checkpoints = arg_value(argc, argv, &i);
        else {
            fprintf(stderr,
                    "usage: mimprof-example [--rounds N] [--sleep-us U] [--checkpoints K]\n");
            return 2;
        }
    }
    char *config = load_config();
    for (unsigned long r = 0; r < rounds; r++) {
        handle_request((unsigned)r);
        if (sleep_us > 0) {
            struct timespec ts = {(time_t)(sleep_us / 1000000), (long)(sleep_us % 1000000) * 1000};
            nanosleep(&ts, NULL);
        }
        if (checkpoints > 1 && r + 1 < rounds && (r + 1) % (rounds / checkpoints + 1) == 0)
            checkpoint();
    }
    size_t cached = 0;
    for (size_t i = 0; i < CACHE_SLOTS; i++)
        cached += cache[i] != NULL ? CACHE_ENTRY_BYTES : 0;
    fprintf(stderr,
            "mimprof-example: %lu requests; remember_session holds %zu bytes (the leak), "
            "cache_store %zu bytes, load_config %d bytes\n",
            rounds, (size_t)rounds * sizeof(struct session), cached, CONFIG_BYTES);
    printf("served %lu requests (checksum %lu, config %c)\n", rounds, sink, config[0]);
    /* Exit without freeing: the leak and the cache are still in use in the
     * final report. */
    return 0;
}
