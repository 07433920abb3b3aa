/* SPDX-License-Identifier: MIT */
/* mimprof flame: a self-contained SVG flame graph. No external script,
 * style or font is referenced; the JavaScript and CSS are inline.
 *
 * Layout: one row per stack depth, root ("all") at the bottom; a frame's
 * width is its cumulative value / total * (width - 2 * PAD), exactly (the
 * test parses the SVG and checks it). Siblings are ordered by name; the
 * siblings of a frame narrower than min_width px are merged into one grey
 * frame "[N frames merged]" drawn after the others, whose children are not
 * drawn, so the element count stays bounded on large profiles.
 *
 * Each frame is <g class="f" data-x data-w data-d data-v> with a <title>
 * (tooltip: name, value, share), a <rect> and a <text>; data-x/data-w are
 * fractions of the total (the zoom works on them), data-v is the value.
 * The colour is a hash of the function name: the same function has the
 * same colour in every graph.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flame_tree.h"
#include "units.h"
#include "views.h"

enum { PAD = 10, FRAME_H = 16, HEADER_H = 44, FOOTER_H = 30 };

static void xml_put(FILE *out, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&':
            fputs("&amp;", out);
            break;
        case '<':
            fputs("&lt;", out);
            break;
        case '>':
            fputs("&gt;", out);
            break;
        case '"':
            fputs("&quot;", out);
            break;
        case '\'':
            fputs("&#39;", out);
            break;
        default:
            fputc(*s, out);
        }
    }
}

static uint32_t fnv1a(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 16777619u;
    }
    return h;
}

/* Warm palette, stable per name. */
static void colour(const char *name, int rgb[3])
{
    uint32_t h = fnv1a(name);
    rgb[0] = 205 + (int)(h % 50);
    rgb[1] = (int)((h >> 8) % 230);
    rgb[2] = (int)((h >> 20) % 55);
}

typedef struct frame_out {
    FILE *out;
    double scale; /* px per value unit */
    int64_t total;
    const char *unit;
    unsigned height;
} frame_out;

static void emit_frame(const frame_out *fo, const char *name, bool merged, int64_t xval,
                       int64_t value, unsigned depth)
{
    FILE *out = fo->out;
    double x = PAD + (double)xval * fo->scale, w = (double)value * fo->scale;
    double y = (double)fo->height - FOOTER_H - (double)(depth + 1) * FRAME_H;
    char shown[1024], vbuf[32];
    mpt_display_name(name, shown, sizeof shown, 300);
    mpt_format_value(vbuf, sizeof vbuf, (double)value, fo->unit);
    int rgb[3] = {170, 170, 170};
    if (!merged)
        colour(name, rgb);
    fprintf(out, "<g class=\"f%s\" data-x=\"%.9f\" data-w=\"%.9f\" data-d=\"%u\" data-v=\"%lld\">",
            merged ? " merged" : "", (double)xval / (double)fo->total,
            (double)value / (double)fo->total, depth, (long long)value);
    fputs("<title>", out);
    xml_put(out, shown);
    fprintf(out, " (%s, %.2f%%)</title>", vbuf, 100.0 * (double)value / (double)fo->total);
    fprintf(out,
            "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" rx=\"2\" "
            "fill=\"rgb(%d,%d,%d)\"/>",
            x, y, w, FRAME_H - 1, rgb[0], rgb[1], rgb[2]);
    /* Text: about 7 px per character at 12 px Verdana. */
    long fit = (long)((w - 6.0) / 7.0);
    char label[1024];
    label[0] = '\0';
    if (fit >= 3)
        mpt_display_name(name, label, sizeof label, (size_t)fit);
    fprintf(out, "<text x=\"%.2f\" y=\"%.1f\">", x + 3.0, y + FRAME_H - 4.5);
    xml_put(out, label);
    fputs("</text></g>\n", out);
}

static const char FLAME_CSS[] =
    "text{font-family:Verdana,'DejaVu Sans',sans-serif;font-size:12px;fill:#000}\n"
    "#title{font-size:17px;text-anchor:middle}\n"
    "g.f text{pointer-events:none}\n"
    "g.f:hover rect{stroke:#000;stroke-width:0.6;cursor:pointer}\n"
    "g.parent rect{opacity:0.55}\n"
    ".button{cursor:pointer;fill:#0645ad}\n"
    ".hide{display:none}\n"
    "#search{width:260px;font:12px Verdana,sans-serif}\n";

static const char FLAME_JS[] =
    "'use strict';\n"
    "var W,PAD=10,frames,details,matched,search,unzoomBtn,zoomed=null;\n"
    "function init(){\n"
    " W=parseFloat(document.documentElement.getAttribute('width'));\n"
    " frames=document.getElementById('frames');\n"
    " details=document.getElementById('details');\n"
    " matched=document.getElementById('matched');\n"
    " search=document.getElementById('search');\n"
    " unzoomBtn=document.getElementById('unzoom');\n"
    " frames.addEventListener('click',function(e){var g=e.target.closest('g.f');if(g)zoom(g);});\n"
    " frames.addEventListener('mouseover',function(e){var g=e.target.closest('g.f');"
    "if(g)details.textContent=g.querySelector('title').textContent;});\n"
    " frames.addEventListener('mouseout',function(){details.textContent=' ';});\n"
    " unzoomBtn.addEventListener('click',unzoom);\n"
    " if(search){search.addEventListener('input',function(){find(search.value);});}\n"
    " document.addEventListener('keydown',function(e){\n"
    "  if((e.ctrlKey||e.metaKey)&&e.key==='f'&&search){e.preventDefault();search.focus();}\n"
    "  if(e.key==='Escape'){if(search)search.value='';find('');unzoom();}});\n"
    " /* file.svg#zoom=NAME&search=REGEX: open zoomed and/or searched */\n"
    " var term=null;decodeURIComponent(location.hash.slice(1)).split('&').forEach(function(kv){\n"
    "  var i=kv.indexOf('=');if(i<0)return;var k=kv.slice(0,i),v=kv.slice(i+1);\n"
    "  if(k==='search')term=v;\n"
    "  if(k==='zoom'){var best=null;all().forEach(function(g){if(fname(g)===v&&"
    "(!best||num(g,'data-w')>num(best,'data-w')))best=g;});if(best)zoom(best);}});\n"
    " if(term!==null){if(search)search.value=term;find(term);}\n"
    " document.documentElement.setAttribute('data-ready','1');\n"
    "}\n"
    "function num(g,a){return parseFloat(g.getAttribute(a));}\n"
    "function fname(g){return g.querySelector('title').textContent.replace(/ \\([^()]*\\)$/,'');}\n"
    "function fit(t,name,pw){var n=Math.floor((pw-6)/7);"
    "t.textContent=n<3?'':(name.length<=n?name:name.slice(0,n-2)+'..');}\n"
    "function place(g,x,w){var r=g.querySelector('rect'),t=g.querySelector('text');"
    "var px=PAD+x*(W-2*PAD),pw=w*(W-2*PAD);"
    "r.setAttribute('x',px.toFixed(2));r.setAttribute('width',pw.toFixed(2));"
    "if(t){t.setAttribute('x',(px+3).toFixed(2));fit(t,fname(g),pw);}}\n"
    "function all(){return frames.querySelectorAll('g.f');}\n"
    "function zoom(z){var zx=num(z,'data-x'),zw=num(z,'data-w'),zd=num(z,'data-d'),e=1e-9;\n"
    " zoomed=z;all().forEach(function(g){var "
    "x=num(g,'data-x'),w=num(g,'data-w'),d=num(g,'data-d');\n"
    "  "
    "if(d<zd&&x<=zx+e&&x+w>=zx+zw-e){g.style.display='';g.classList.add('parent');place(g,0,1);}\n"
    "  else if(d>=zd&&x>=zx-e&&x+w<=zx+zw+e){g.style.display='';g.classList.remove('parent');"
    "place(g,(x-zx)/zw,w/zw);}\n"
    "  else g.style.display='none';});\n"
    " unzoomBtn.classList.remove('hide');if(search&&search.value)find(search.value);}\n"
    "function unzoom(){zoomed=null;all().forEach(function(g){g.style.display='';"
    "g.classList.remove('parent');place(g,num(g,'data-x'),num(g,'data-w'));});\n"
    " unzoomBtn.classList.add('hide');if(search&&search.value)find(search.value);}\n"
    "function find(term){var re=null,low=term.toLowerCase();\n"
    " if(term){try{re=new RegExp(term,'i');}catch(err){re=null;}}\n"
    " var spans=[],zx=zoomed?num(zoomed,'data-x'):0,zw=zoomed?num(zoomed,'data-w'):1;\n"
    " all().forEach(function(g){var r=g.querySelector('rect'),n=fname(g);\n"
    "  if(!r.hasAttribute('data-fill'))r.setAttribute('data-fill',r.getAttribute('fill'));\n"
    "  var hit=term&&(re?re.test(n):n.toLowerCase().indexOf(low)>=0);\n"
    "  r.setAttribute('fill',hit?'rgb(230,0,230)':r.getAttribute('data-fill'));\n"
    "  if(hit&&g.style.display!=='none'&&!g.classList.contains('parent'))"
    "spans.push([num(g,'data-x'),num(g,'data-x')+num(g,'data-w')]);});\n"
    " spans.sort(function(a,b){return a[0]-b[0];});var sum=0,end=-1;\n"
    " spans.forEach(function(s){if(s[0]>=end){sum+=s[1]-s[0];end=s[1];}"
    "else if(s[1]>end){sum+=s[1]-end;end=s[1];}});\n"
    " matched.textContent=term?'Matched: '+(100*sum/zw).toFixed(2)+'%':' ';}\n"
    "window.addEventListener('load',init);\n";

int mpt_flame_write(FILE *out, const mpt_profile *p, size_t type, const mpt_flame_opts *o)
{
    mpt_flame_tree t;
    if (mpt_flame_tree_build(&t, p, type) != 0) {
        mpt_flame_tree_free(&t);
        return -1;
    }
    unsigned width = o->width >= 200 ? o->width : 200;
    int64_t total = t.nodes[0].value;
    double scale = total > 0 ? (double)(width - 2 * PAD) / (double)total : 0.0;
    double min_w = o->min_width > 0.0 ? o->min_width : 0.0;

    /* Pass 1: the drawn depth; pass 2: output. Both walk the same visible
     * tree with an explicit stack (stacks may be deep). */
    typedef struct item {
        uint32_t node; /* UINT32_MAX: a merged group */
        uint32_t depth;
        int64_t x;
        int64_t value;
        uint32_t count; /* merged: how many frames */
    } item;
    size_t scap = 1024, sn;
    item *stack = malloc(scap * sizeof *stack);
    if (stack == NULL) {
        mpt_flame_tree_free(&t);
        return -1;
    }
    unsigned max_depth = 0, height = 0;
    frame_out fo = {out, scale, total > 0 ? total : 1, p->type_unit[type], 0};
    int rc = 0;
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        if (pass == 1) {
            height = HEADER_H + (max_depth + 1) * FRAME_H + FOOTER_H;
            fo.height = height;
            char tname[96];
            mpt_display_name(p->type_name[type], tname, sizeof tname, 60);
            fprintf(out,
                    "<?xml version=\"1.0\" standalone=\"no\"?>\n"
                    "<svg version=\"1.1\" width=\"%u\" height=\"%u\" viewBox=\"0 0 %u %u\" "
                    "xmlns=\"http://www.w3.org/2000/svg\">\n",
                    width, height, width, height);
            fprintf(out, "<style>\n%s</style>\n<script><![CDATA[\n%s]]></script>\n", FLAME_CSS,
                    FLAME_JS);
            fprintf(out, "<rect x=\"0\" y=\"0\" width=\"%u\" height=\"%u\" fill=\"#f8f8f8\"/>\n",
                    width, height);
            fprintf(out, "<text id=\"title\" x=\"%u\" y=\"24\">", width / 2);
            if (o->title != NULL) {
                char tt[512];
                xml_put(out, mpt_display_name(o->title, tt, sizeof tt, 120));
            } else {
                fputs("Flame graph: ", out);
                xml_put(out, tname);
            }
            char tot[32];
            mpt_format_value(tot, sizeof tot, (double)total, p->type_unit[type]);
            fprintf(out,
                    "</text>\n<text x=\"%d\" y=\"40\" style=\"font-size:11px;fill:#555\">total %s"
                    "; click a frame to zoom, Ctrl-F or the box to search</text>\n",
                    PAD, tot);
            fprintf(
                out,
                "<text id=\"unzoom\" class=\"button hide\" x=\"%d\" y=\"24\">Reset zoom</text>\n",
                PAD);
            fprintf(out,
                    "<foreignObject x=\"%u\" y=\"8\" width=\"280\" height=\"26\">"
                    "<input xmlns=\"http://www.w3.org/1999/xhtml\" id=\"search\" type=\"search\" "
                    "placeholder=\"search (regex)\"/></foreignObject>\n",
                    width - 290);
            fprintf(out, "<text id=\"details\" x=\"%d\" y=\"%u\"> </text>\n", PAD, height - 10);
            fprintf(out,
                    "<text id=\"matched\" x=\"%u\" y=\"%u\" style=\"text-anchor:end\"> </text>\n",
                    width - PAD, height - 10);
            fputs("<g id=\"frames\">\n", out);
            if (total <= 0) {
                fprintf(out, "<text x=\"%d\" y=\"%u\">no positive values of this type</text>\n",
                        PAD, height - FOOTER_H - 4);
                break;
            }
        }
        sn = 0;
        stack[sn++] = (item){0, 0, 0, t.nodes[0].value, 0};
        while (sn > 0) {
            item it = stack[--sn];
            if (pass == 0) {
                if (it.depth > max_depth)
                    max_depth = it.depth;
            } else if (it.node == UINT32_MAX) {
                char label[48];
                snprintf(label, sizeof label, "[%u frames merged]", it.count);
                emit_frame(&fo, label, true, it.x, it.value, it.depth);
            } else {
                emit_frame(&fo, it.node == 0 ? "all" : p->names[t.nodes[it.node].name], false, it.x,
                           it.value, it.depth);
            }
            if (it.node == UINT32_MAX)
                continue;
            /* Children: kept ones in name order from it.x, then the merged group. */
            size_t a = t.cstart[it.node], b = t.cstart[it.node + 1];
            if (sn + (b - a) + 1 > scap) {
                size_t ncap = (sn + (b - a) + 1) * 2;
                item *ns = realloc(stack, ncap * sizeof *ns);
                if (ns == NULL) {
                    rc = -1;
                    break;
                }
                stack = ns;
                scap = ncap;
            }
            int64_t x = it.x, tiny_sum = 0;
            uint32_t tiny_n = 0, tiny_one = 0;
            size_t first = sn;
            for (size_t c = a; c < b; c++) {
                uint32_t ch = t.child[c];
                int64_t v = t.nodes[ch].value;
                if ((double)v * scale < min_w) {
                    tiny_sum = mpt_sat_add(tiny_sum, v);
                    tiny_n++;
                    tiny_one = ch;
                    continue;
                }
                stack[sn++] = (item){ch, it.depth + 1, x, v, 0};
                x += v;
            }
            if (tiny_n == 1)
                stack[sn++] = (item){tiny_one, it.depth + 1, x, tiny_sum, 0};
            else if (tiny_n > 1)
                stack[sn++] = (item){UINT32_MAX, it.depth + 1, x, tiny_sum, tiny_n};
            /* Reverse so that output goes left to right (cosmetic). */
            for (size_t l = first, r = sn; l + 1 < r; l++, r--) {
                item tmp = stack[l];
                stack[l] = stack[r - 1];
                stack[r - 1] = tmp;
            }
        }
    }
    if (rc == 0)
        fputs("</g>\n</svg>\n", out);
    free(stack);
    mpt_flame_tree_free(&t);
    return rc == 0 && !ferror(out) ? 0 : -1;
}

void mpt_flame_opts_init(mpt_flame_opts *o)
{
    o->title = NULL;
    o->width = 1200;
    o->min_width = 1.0;
}

int mpt_cmd_flame(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"type", required_argument, NULL, 't'},
        {"output", required_argument, NULL, 'o'},
        {"title", required_argument, NULL, 'T'},
        {"width", required_argument, NULL, 'w'},
        {"min-width", required_argument, NULL, 'm'},
        {"older-than", required_argument, NULL, MPT_OPT_OLDER},
        {"younger-than", required_argument, NULL, MPT_OPT_YOUNGER},
        {"no-demangle", no_argument, NULL, 'D'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *type = NULL, *path = "flame.svg";
    mpt_flame_opts fo;
    mpt_flame_opts_init(&fo);
    mpt_limits lim;
    mpt_limits_init(&lim);
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":t:o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 't':
            type = optarg;
            break;
        case 'o':
            path = optarg;
            break;
        case 'T':
            fo.title = optarg;
            break;
        case 'w': {
            char *end;
            unsigned long v = strtoul(optarg, &end, 10);
            if (*end != '\0' || v < 200 || v > 100000 || optarg[0] == '-') {
                fprintf(stderr, "mimprof flame: --width wants 200..100000 px, not '%s'\n", optarg);
                return MPT_EXIT_USAGE;
            }
            fo.width = (unsigned)v;
            break;
        }
        case 'm': {
            char *end;
            double v = strtod(optarg, &end);
            if (*end != '\0' || end == optarg || !(v >= 0.0 && v <= 1000.0)) {
                fprintf(stderr, "mimprof flame: --min-width wants 0..1000 px, not '%s'\n", optarg);
                return MPT_EXIT_USAGE;
            }
            fo.min_width = v;
            break;
        }
        case MPT_OPT_OLDER:
        case MPT_OPT_YOUNGER: {
            int rc = mpt_parse_age_opt("flame", c, optarg, &lim);
            if (rc >= 0)
                return rc;
            break;
        }
        case 'D':
            lim.raw_names = true;
            break;
        case 'h':
            mpt_usage(stdout, "flame");
            return MPT_EXIT_OK;
        default: /* ':' (an option without its value) or an unknown one */
            mpt_usage_bad_option("flame", c, argv[optind - 1]);
            return MPT_EXIT_USAGE;
        }
    }
    if (argc - optind != 1) {
        fprintf(stderr, "mimprof flame: want exactly one FILE (see mimprof flame --help)\n");
        return MPT_EXIT_USAGE;
    }
    char err[640];
    mpt_profile *p;
    if (mpt_profile_load(argv[optind], &lim, &p, err, sizeof err) != 0) {
        fprintf(stderr, "mimprof flame: %s\n", err);
        return MPT_EXIT_FAIL;
    }
    int t = mpt_profile_pick_type(p, type, err, sizeof err);
    if (t < 0) {
        fprintf(stderr, "mimprof flame: %s\n", err);
        mpt_profile_free(p);
        return MPT_EXIT_FAIL;
    }
    bool to_stdout = strcmp(path, "-") == 0;
    /* Write next to the target and rename: never a half-written SVG. */
    char *tmp = NULL;
    FILE *out = stdout;
    if (!to_stdout) {
        if (asprintf(&tmp, "%s.tmp.%ld", path, (long)getpid()) < 0) {
            mpt_profile_free(p);
            fprintf(stderr, "mimprof flame: out of memory\n");
            return MPT_EXIT_FAIL;
        }
        out = fopen(tmp, "w");
        if (out == NULL) {
            fprintf(stderr, "mimprof flame: cannot write %s: %s\n", path, strerror(errno));
            free(tmp);
            mpt_profile_free(p);
            return MPT_EXIT_FAIL;
        }
    }
    int rc = mpt_flame_write(out, p, (size_t)t, &fo);
    if (!to_stdout) {
        if (fclose(out) != 0)
            rc = -1;
        if (rc == 0 && rename(tmp, path) != 0)
            rc = -1;
        if (rc != 0)
            remove(tmp);
        free(tmp);
    } else if (fflush(stdout) != 0) {
        rc = -1;
    }
    mpt_profile_free(p);
    if (rc != 0) {
        fprintf(stderr, "mimprof flame: cannot write %s\n", path);
        return MPT_EXIT_FAIL;
    }
    return MPT_EXIT_OK;
}
