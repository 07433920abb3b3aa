/* SPDX-License-Identifier: MIT */
/* The pieces of the control socket and the HTTP endpoint that need no
 * process around them (plain C: these run in the sanitizer trees too):
 * the request parser, the endpoint's address rules, and the cumulative
 * profile's merge (Go's semantics over windowed reports). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "control/arena.h"
#include "control/cumul.h"
#include "control/http_parse.h"
#include "control/proto.h"
#include "profile.pb-c.h"

static int parse(const char *line, mpc_ctl_req *req, char *why)
{
    return mpc_ctl_parse(line, strlen(line), req, why, 512);
}

Test(ctl_proto, parses_every_command)
{
    mpc_ctl_req r;
    char why[512];
    cr_assert_eq(parse("status", &r, why), 0, "%s", why);
    cr_expect_eq(r.cmd, MPC_CTL_STATUS);
    cr_assert_eq(parse("start interval=64k every=500ms", &r, why), 0, "%s", why);
    cr_expect_eq(r.cmd, MPC_CTL_START);
    cr_expect_eq(r.interval, 65536);
    cr_expect(r.has_every);
    cr_expect_eq(r.every_ms, 500);
    cr_assert_eq(parse("set interval=1m", &r, why), 0, "%s", why);
    cr_expect_eq(r.interval, 1 << 20);
    cr_assert_eq(parse("report", &r, why), 0);
    cr_assert_eq(parse("image", &r, why), 0);
    cr_assert_eq(parse("stop", &r, why), 0);
}

Test(ctl_proto, refuses_with_a_reason)
{
    static const char *const bad[] = {"",
                                      "frob",
                                      "status now",
                                      "start  interval=1k",
                                      "start interval=",
                                      "set",
                                      "set every=1s",
                                      "stop ",
                                      "start interval=0",
                                      "start bogus=1",
                                      "report\t1",
                                      "start every=x",
                                      "set interval=99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mpc_ctl_req r;
        char why[512] = "";
        cr_expect_eq(parse(bad[i], &r, why), -1, "'%s' accepted", bad[i]);
        cr_expect_neq(why[0], '\0', "no reason for '%s'", bad[i]);
    }
    char nul[] = {'s', 't', 'o', 'p', '\0', 'x'};
    mpc_ctl_req r;
    char why[512];
    cr_expect_eq(mpc_ctl_parse(nul, sizeof nul, &r, why, sizeof why), -1, "a NUL byte");
}

Test(http_addr, loopback_by_default_wildcard_only_when_asked)
{
    struct sockaddr_storage ss;
    unsigned len;
    char why[512];
    cr_assert_eq(mpc_http_parse_addr("6060", false, &ss, &len, why, sizeof why), 0, "%s", why);
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    cr_expect_eq(v4->sin_family, AF_INET);
    cr_expect_eq(ntohl(v4->sin_addr.s_addr), INADDR_LOOPBACK);
    cr_expect_eq(ntohs(v4->sin_port), 6060);
    cr_assert_eq(mpc_http_parse_addr(":0", false, &ss, &len, why, sizeof why), 0, "%s", why);
    cr_assert_eq(mpc_http_parse_addr("[::1]:7", false, &ss, &len, why, sizeof why), 0, "%s", why);
    cr_expect_eq(ss.ss_family, AF_INET6);
    cr_expect_eq(mpc_http_parse_addr("0.0.0.0:80", false, &ss, &len, why, sizeof why), -1);
    cr_expect(strstr(why, "every interface") != NULL, "%s", why);
    cr_expect_eq(mpc_http_parse_addr("[::]:80", false, &ss, &len, why, sizeof why), -1);
    cr_expect_eq(mpc_http_parse_addr("0.0.0.0:80", true, &ss, &len, why, sizeof why), 0);
    cr_expect_eq(mpc_http_parse_addr("example.com:80", true, &ss, &len, why, sizeof why), -1);
    cr_expect_eq(mpc_http_parse_addr("1.2.3.4:65536", true, &ss, &len, why, sizeof why), -1);
    cr_expect_eq(mpc_http_parse_addr("1.2.3.4:", true, &ss, &len, why, sizeof why), -1);
}

/* ---- the cumulative profile ------------------------------------------ */

/* A report like the runtime's: four types; sample 0 at `leak` (alloc
 * and inuse, labelled __delta__="false" on its alloc part as the runtime
 * does), sample 1 at `churn` (alloc only). */
static uint8_t *report(int64_t leak_alloc, int64_t leak_inuse, int64_t churn_alloc, size_t *len)
{
    static char *strings[] = {"",      "alloc_objects", "count",       "alloc_space",
                              "bytes", "inuse_objects", "inuse_space", "leak",
                              "churn", "__delta__",     "false",       "space"};
    Perftools__Profiles__Profile p;
    perftools__profiles__profile__init(&p);
    p.n_string_table = sizeof strings / sizeof strings[0];
    p.string_table = strings;
    Perftools__Profiles__ValueType vt[4], period;
    Perftools__Profiles__ValueType *vtp[4];
    int64_t names[4][2] = {{1, 2}, {3, 4}, {5, 2}, {6, 4}};
    for (int i = 0; i < 4; i++) {
        perftools__profiles__value_type__init(&vt[i]);
        vt[i].type = names[i][0];
        vt[i].unit = names[i][1];
        vtp[i] = &vt[i];
    }
    p.n_sample_type = 4;
    p.sample_type = vtp;
    perftools__profiles__value_type__init(&period);
    period.type = 11;
    period.unit = 4;
    p.period_type = &period;
    p.period = 4096;
    Perftools__Profiles__Function fn[2], *fnp[2];
    Perftools__Profiles__Line ln[2], *lnp[2][1];
    Perftools__Profiles__Location loc[2], *locp[2];
    for (int i = 0; i < 2; i++) {
        perftools__profiles__function__init(&fn[i]);
        fn[i].id = 10 + (uint64_t)i; /* ids are the report's own */
        fn[i].name = fn[i].system_name = 7 + i;
        fnp[i] = &fn[i];
        perftools__profiles__line__init(&ln[i]);
        ln[i].function_id = fn[i].id;
        lnp[i][0] = &ln[i];
        perftools__profiles__location__init(&loc[i]);
        loc[i].id = 20 + (uint64_t)i;
        loc[i].address = 0x1000 + (uint64_t)i * 16;
        loc[i].n_line = 1;
        loc[i].line = lnp[i];
        locp[i] = &loc[i];
    }
    p.n_function = p.n_location = 2;
    p.function = fnp;
    p.location = locp;
    Perftools__Profiles__Label delta, *dp[1] = {&delta};
    perftools__profiles__label__init(&delta);
    delta.key = 9;
    delta.str = 10;
    Perftools__Profiles__Sample sm[3], *smp[3];
    uint64_t ids[2] = {20, 21};
    int64_t v[3][4] = {{leak_alloc / 4096, leak_alloc, 0, 0},
                       {0, 0, leak_inuse / 4096, leak_inuse},
                       {churn_alloc / 64, churn_alloc, 0, 0}};
    for (int i = 0; i < 3; i++) {
        perftools__profiles__sample__init(&sm[i]);
        sm[i].n_location_id = 1;
        sm[i].location_id = &ids[i == 2];
        sm[i].n_value = 4;
        sm[i].value = v[i];
        if (i != 1) {
            sm[i].n_label = 1;
            sm[i].label = dp;
        }
        smp[i] = &sm[i];
    }
    p.n_sample = 3;
    p.sample = smp;
    *len = perftools__profiles__profile__get_packed_size(&p);
    uint8_t *buf = malloc(*len);
    cr_assert(buf != NULL);
    perftools__profiles__profile__pack(&p, buf);
    return buf;
}

/* Per function: its values summed over samples (leaf = the only frame). */
static void totals(const uint8_t *pb, size_t len, const char *fn, int64_t out[4])
{
    Perftools__Profiles__Profile *p = perftools__profiles__profile__unpack(NULL, len, pb);
    cr_assert(p != NULL, "the cumulative profile does not decode");
    memset(out, 0, 4 * sizeof *out);
    for (size_t i = 0; i < p->n_sample; i++) {
        const Perftools__Profiles__Sample *s = p->sample[i];
        for (size_t j = 0; j < s->n_label; j++)
            cr_expect_neq(strcmp(p->string_table[s->label[j]->key], "__delta__"), 0,
                          "no __delta__ label");
        const Perftools__Profiles__Location *l = NULL;
        for (size_t k = 0; k < p->n_location; k++)
            if (p->location[k]->id == s->location_id[0])
                l = p->location[k];
        cr_assert(l != NULL && l->n_line == 1);
        const Perftools__Profiles__Function *f = NULL;
        for (size_t k = 0; k < p->n_function; k++)
            if (p->function[k]->id == l->line[0]->function_id)
                f = p->function[k];
        cr_assert(f != NULL);
        if (strcmp(p->string_table[f->name], fn) == 0)
            for (int t = 0; t < 4; t++)
                out[t] += s->value[t];
    }
    perftools__profiles__profile__free_unpacked(p, NULL);
}

Test(cumul, alloc_summed_inuse_replaced_delta_subtracted)
{
    mpc_cumul_reset(1000);
    uint8_t *out;
    size_t n, olen;
    cr_expect_eq(mpc_cumul_encode("inuse_space", 2000, NULL, &out, &olen), -1, "nothing yet");
    uint8_t *r1 = report(8192, 8192, 640, &n);
    cr_assert_eq(mpc_cumul_add(r1, n), 0);
    free(r1);
    mpc_cumul_mark mark;
    cr_assert_eq(mpc_cumul_mark_take(&mark, 1500), 0);
    uint8_t *r2 = report(4096, 12288, 64, &n);
    cr_assert_eq(mpc_cumul_add(r2, n), 0);
    free(r2);
    cr_expect_eq(mpc_cumul_add((const uint8_t *)"\xff\xff", 2), -1, "garbage is refused");
    int64_t v[4];
    cr_assert_eq(mpc_cumul_encode("inuse_space", 2000, NULL, &out, &olen), 0);
    totals(out, olen, "leak", v);
    cr_expect_eq(v[1], 8192 + 4096, "alloc_space: cumulative");
    cr_expect_eq(v[3], 12288, "inuse_space: the newest report's");
    totals(out, olen, "churn", v);
    cr_expect_eq(v[1], 640 + 64);
    Perftools__Profiles__Profile *p = perftools__profiles__profile__unpack(NULL, olen, out);
    cr_assert(p != NULL);
    cr_expect_str_eq(p->string_table[p->default_sample_type], "inuse_space");
    cr_expect_eq(p->duration_nanos, 1000);
    perftools__profiles__profile__free_unpacked(p, NULL);
    mpc_unmap(out, olen);
    cr_assert_eq(mpc_cumul_encode("alloc_space", 2000, &mark, &out, &olen), 0);
    totals(out, olen, "leak", v);
    cr_expect_eq(v[1], 4096, "since the mark");
    cr_expect_eq(v[3], 12288 - 8192, "inuse_space too, as Go's delta profile");
    mpc_unmap(out, olen);
    mpc_cumul_reset(3000);
    cr_expect_eq(mpc_cumul_encode("inuse_space", 4000, &mark, &out, &olen), -1,
                 "a mark of an earlier session");
    mpc_cumul_mark_free(&mark);
}

static bool http_req(const char *s, mpc_http_req *r)
{
    return mpc_http_parse(s, strlen(s), 16384, r);
}

Test(http_parse, requests_and_refusals)
{
    mpc_http_req r;
    cr_assert(http_req("GET /debug/pprof/heap?seconds=5 HTTP/1.1\r\nHost: x\r\n\r\n", &r));
    cr_assert_eq(r.status, 0);
    cr_assert_eq(r.method, MPC_HTTP_GET);
    cr_assert_str_eq(r.target, "/debug/pprof/heap");
    cr_assert_str_eq(r.query, "seconds=5");
    cr_assert_eq(mpc_http_query_seconds(r.query), 5);
    cr_assert_not(http_req("GET /debug/pprof/heap HTTP/1.1\r\nHost: x\r\n", &r), "incomplete");
    const char *post = "POST /debug/pprof/symbol HTTP/1.1\r\nContent-Length: 6\r\n\r\n0x1234";
    cr_assert(http_req(post, &r));
    cr_assert(r.status == 0 && r.symbol && r.body_len == 6);
    cr_assert_eq(memcmp(post + r.body_off, "0x1234", 6), 0);
    cr_assert_not(mpc_http_parse(post, strlen(post) - 2, 16384, &r), "body still coming");
    cr_assert(http_req("POST /debug/pprof/heap HTTP/1.1\r\n\r\n", &r));
    cr_assert_eq(r.status, 405);
    cr_assert(
        http_req("POST /debug/pprof/symbol HTTP/1.1\r\nContent-Length: 5abc\r\n\r\nabcde", &r));
    cr_assert_eq(r.status, 400, "a Content-Length with junk after its digits");
    cr_assert(http_req("POST /debug/pprof/symbol HTTP/1.1\r\nContent-Length: 99999\r\n\r\n", &r));
    cr_assert_eq(r.status, 413);
    cr_assert(http_req("GET  /x HTTP/1.1\r\n\r\n", &r));
    cr_assert_eq(r.status, 400);
    cr_assert(mpc_http_parse("GET /x", 6, 6, &r), "a full buffer is answered");
    cr_assert_eq(r.status, 431);
    cr_assert_eq(mpc_http_query_seconds("debug=1"), -2);
    cr_assert_eq(mpc_http_query_seconds("debug=0&seconds=61"), -1);
    cr_assert_eq(mpc_http_query_seconds(NULL), 0);
}
