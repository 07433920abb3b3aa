/* SPDX-License-Identifier: MIT */
/* The help texts of the mimprof command and its subcommands. */
#include <stdio.h>
#include <string.h>

#include "views.h"

static const char USAGE_MAIN[] =
    "usage: mimprof COMMAND [options] ...\n"
    "\n"
    "Heap profiling over mimalloc (or jemalloc) for any program, with pprof output.\n"
    "\n"
    "commands:\n"
    "  run [options] -- CMD [ARGS...]   run CMD under the profiler; writes "
    "DIR/heap.<pid>.<seq>.pb.gz\n"
    "  top FILE [options]               the top functions of a pprof file\n"
    "  flame FILE [options] -o OUT.svg  a self-contained SVG flame graph\n"
    "  diff BASE NEW [options]          what grew and shrank per function\n"
    "  report DIR|FILES... -o OUT.html  one page of a run: the heap over time, any moment\n"
    "                                   or two, ages, RSS reconciled\n"
    "  image pprof|top|diff|info ...    heap images (mp_profiler_write_image, run --image-*)\n"
    "  ctl PID COMMAND | ctl list       control a profiled process while it runs\n"
    "\n"
    "  mimprof COMMAND --help           options of a command\n"
    "  mimprof --version\n";

static const char USAGE_RUN[] =
    "usage: mimprof run [options] [--] CMD [ARGS...]\n"
    "\n"
    "Runs CMD with the profiling preload. Reports are written periodically, at exit,\n"
    "on SIGUSR2 (to CMD or to mimprof) and, when possible, when CMD is killed by a\n"
    "signal, as DIR/heap.<pid>.<seq>.pb.gz (gzip-compressed pprof).\n"
    "\n"
    "options:\n"
    "  -i, --interval SIZE       mean bytes between samples (default 512k; e.g. 64k, 1m)\n"
    "  -a, --allocator NAME      mimalloc or jemalloc (default: jemalloc when CMD links it)\n"
    "  -e, --every DURATION      report period (default 10s; e.g. 500ms, 1m; 0 = only at exit)\n"
    "  -o, --output DIR          where reports go (default ./mimprof-out)\n"
    "  -s, --symbolize MODE      none | functions (default) | lines (file:line, inlined frames)\n"
    "      --follow-fork         forked children write their own reports (default)\n"
    "      --no-follow-fork      forked children are not profiled\n"
    "      --follow-exec         programs CMD executes are profiled too\n"
    "      --no-follow-exec      ... are not (default)\n"
    "      --max-depth N         frames kept per stack (default 64)\n"
    "      --drop-frames REGEX   more frames to drop from the leaf end of stacks, as the\n"
    "                            allocator's entry points are (e.g. 'xmalloc|g_malloc')\n"
    "      --keep-alloc-frames   drop no frame: operator new, malloc, ... stay the leaves\n"
    "      --seed N              fixed sampling seed (reproducible runs)\n"
    "  -q, --quiet               no summary line on stderr\n"
    "      --dormant             load the profiler but start no session until\n"
    "                            `mimprof ctl PID start` (MIMPROF_DORMANT=1)\n"
    "      --http ADDR:PORT      serve Go's /debug/pprof/heap and /allocs there (PORT alone:\n"
    "                            127.0.0.1); a wildcard address needs --http-wildcard\n"
    "      --image-on-exit       also save a heap image at exit (DIR/heap.<pid>.<seq>.mpimg)\n"
    "      --image-every DURATION  ... and one every DURATION (e.g. 1m)\n"
    "      --image-dir DIR       where heap images go (default: the output directory);\n"
    "                            with any of these, SIGUSR2 also saves one (MIMPROF_IMAGE)\n"
    "      --report-above SIZE|N%  a report (and an image with the options above) at once\n"
    "                            when RSS crosses SIZE (e.g. 100m), or the cgroup's memory\n"
    "                            N% of its memory.max/memory.high, and at each further tenth\n"
    "      --report-page         at exit, write DIR/report.html: the page of this run's\n"
    "                            reports (mimprof report DIR, for the process with the\n"
    "                            most memory)\n"
    "\n";

/* The rest of `run`'s text (one literal stays under C's 4095 bytes). */
static const char USAGE_RUN_MORE[] =
    "The processes of CMD's tree hand their reports to a collector running as you:\n"
    "it writes them (also those of workers that dropped privileges) and outlives\n"
    "mimprof when CMD daemonizes, holding none of your terminal's descriptors.\n"
    "      --keep N              reports kept per process, newest first (default 10; 0: all)\n"
    "      --keep-size SIZE      older reports go while all of them exceed SIZE (default\n"
    "                            256m; 0: no cap); a process's newest report always stays\n"
    "      --no-collector        each process writes its own reports (no retention)\n"
    "\n"
    "Pyroscope (reports are uploaded while CMD runs; no files unless -o is given):\n"
    "      --pyroscope URL       server, e.g. http://localhost:4040 (PYROSCOPE_SERVER_ADDRESS)\n"
    "      --app NAME            service_name (PYROSCOPE_APPLICATION_NAME)\n"
    "      --tag K=V             a label; repeatable, or K=V,K2=V2 (PYROSCOPE_TAGS)\n"
    "      --instance NAME|none  the label hostname=NAME that keeps replicas apart\n"
    "                            (default: this host's name; none: no such label)\n"
    "      --tenant ID           X-Scope-OrgID (PYROSCOPE_TENANT_ID)\n"
    "      --basic-auth U[:P]    Basic auth; without :P, PYROSCOPE_BASIC_AUTH_PASSWORD\n"
    "      --bearer-token T      bearer token (PYROSCOPE_AUTH_TOKEN keeps it out of ps)\n"
    "      --pyroscope-protocol ingest|push\n"
    "                            POST /ingest (default) or the Push API\n"
    "  Without --every, a report per upload interval (PYROSCOPE_UPLOAD_INTERVAL, 10s).\n"
    "\n"
    "Exit status: CMD's; 128+N when signal N killed it; 127 when it cannot be run;\n"
    "125 for mimprof's own errors (also a bad --app/--tag/... : before CMD starts).\n"
    "The preload is found next to this executable (build tree or install prefix) or\n"
    "in $MIMPROF_PRELOAD_DIR; libmimprof-pyroscope in $MIMPROF_PYROSCOPE_LIB, next\n"
    "to the preload, in the build tree, the install prefix or the loader's path.\n";

static const char USAGE_TOP[] =
    "usage: mimprof top FILE [options]\n"
    "\n"
    "Prints the top functions of a pprof file (gzip-compressed or not; mimprof's, Go's\n"
    "or any other producer's): flat = the function allocated itself, cum = it or its callees.\n"
    "\n"
    "options:\n"
    "  -t, --type TYPE   sample type: alloc_space, alloc_objects, inuse_space, inuse_objects\n"
    "                    (or any type in the file; default: the file's default, the last type)\n"
    "  -n N              rows (default 20; 0 = all)\n"
    "      --cum         sort by cumulative value\n"
    "      --older-than D   only in-use memory at least D old (10s, 10m, 1h; mimprof's age\n"
    "                    label: exact at its bucket bounds 0 1s 3s 10s 30s 1m 3m 10m 30m 1h\n"
    "                    3h 6h 12h 1d 3d 7d); allocation samples have no age and are dropped\n"
    "      --younger-than D only in-use memory less than D old\n"
    "      --age         a column with the median age of each function's cum memory\n"
    "      --no-demangle linkage names as written (default: C++ and Rust names still\n"
    "                    mangled in the file are shown demangled, without parameters)\n";

static const char USAGE_FLAME[] =
    "usage: mimprof flame FILE [options] [-o OUT.svg]\n"
    "\n"
    "Writes a self-contained SVG flame graph (no external scripts or fonts): tooltips\n"
    "with value and share, click to zoom, search box (Ctrl-F), colours stable per function.\n"
    "\n"
    "options:\n"
    "  -t, --type TYPE        sample type (as for top)\n"
    "  -o, --output OUT.svg   output file (default flame.svg; - = standard output)\n"
    "      --title TEXT       title (default \"Flame graph: TYPE\")\n"
    "      --width PX         image width (default 1200)\n"
    "      --min-width PX     siblings narrower than this merge into one frame (default 1)\n"
    "      --older-than D     only in-use memory at least D old (as for top)\n"
    "      --younger-than D   only in-use memory less than D old (as for top)\n"
    "      --no-demangle      linkage names as written (as for top)\n";

static const char USAGE_DIFF[] =
    "usage: mimprof diff BASE NEW [options]\n"
    "\n"
    "What grew and shrank per function (matched by name) between two profiles.\n"
    "\n"
    "options:\n"
    "  -t, --type TYPE   sample type (default inuse_space when both have it)\n"
    "  -n N              rows per section (default 20; 0 = all)\n"
    "      --cum         sort by cumulative delta\n"
    "      --older-than D, --younger-than D  only in-use memory of those ages, in both\n"
    "                    profiles (as for top)\n"
    "      --no-demangle linkage names as written (as for top)\n";

static const char USAGE_REPORT[] =
    "usage: mimprof report DIR|FILES... [options] [-o OUT.html]\n"
    "\n"
    "Writes one self-contained HTML page (no network, no external script or font) of\n"
    "a run's reports (heap.<pid>.<seq>.pb.gz), its peaks (.peak.pb.gz) and threshold\n"
    "reports (--report-above): in-use memory over time by site with RSS and the\n"
    "allocator's resident bytes, peaks and thresholds marked, the allocation rate;\n"
    "click a moment for its flame graph, top table, ages and RSS reconciliation,\n"
    "shift-click a second for what grew and shrank between them.\n"
    "Files that cannot be read are skipped, said and named on the page.\n"
    "\n"
    "options:\n"
    "  -o, --output OUT.html  output file (default report.html)\n"
    "      --pid PID          the process shown (default: the one with the most memory)\n"
    "      --program NAME     ... or the one whose main binary is NAME\n"
    "      --sites K          sites drawn as bands, the rest one band (default 12)\n"
    "      --site-frames N    frames that name a site: 1 = the allocating function\n"
    "                         (default), N = the innermost N frames\n"
    "      --stacks K         stacks kept per moment for its flame graph, the rest merged\n"
    "                         into one frame (default 400); totals stay exact\n"
    "      --top N            rows of each moment's top table (default 50)\n"
    "      --no-demangle      linkage names as written (as for top)\n"
    "  -q, --quiet            no line on stderr\n";

static const char USAGE_CTL[] =
    "usage: mimprof ctl PID COMMAND\n"
    "       mimprof ctl list\n"
    "\n"
    "Controls a process run by mimprof run (PID: the process, or the mimprof run that\n"
    "started it) over its control socket. Only its user and root may.\n"
    "\n"
    "commands:\n"
    "  status                        dormant or running, interval, samples, drops, reports\n"
    "  start [--interval SIZE] [--every DURATION]\n"
    "                                start a session (a dormant process, or after stop)\n"
    "  stop                          write the session's last report and stop: dormant\n"
    "  report -o FILE                a report now, written here (gzip when FILE ends in .gz)\n"
    "  image -o FILE                 a heap image now, written here\n"
    "  set interval SIZE             the interval of the next start\n"
    "  list                          the controllable processes of this user\n";

void mpt_usage(FILE *out, const char *cmd)
{
    const char *text = USAGE_MAIN;
    if (cmd != NULL && strcmp(cmd, "run") == 0)
        text = USAGE_RUN;
    else if (cmd != NULL && strcmp(cmd, "top") == 0)
        text = USAGE_TOP;
    else if (cmd != NULL && strcmp(cmd, "flame") == 0)
        text = USAGE_FLAME;
    else if (cmd != NULL && strcmp(cmd, "diff") == 0)
        text = USAGE_DIFF;
    else if (cmd != NULL && strcmp(cmd, "report") == 0)
        text = USAGE_REPORT;
    else if (cmd != NULL && strcmp(cmd, "ctl") == 0)
        text = USAGE_CTL;
    fputs(text, out);
    if (text == USAGE_RUN)
        fputs(USAGE_RUN_MORE, out);
}

void mpt_usage_bad_option(const char *cmd, int c, const char *arg)
{
    if (c == ':')
        fprintf(stderr, "mimprof %s: option '%s' needs a value\n", cmd, arg);
    else
        fprintf(stderr, "mimprof %s: unknown option '%s' (see mimprof %s --help)\n", cmd, arg, cmd);
}
